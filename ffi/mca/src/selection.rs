//! Whether the user named a component in its framework's selection variable
//! (`--mca btl self,rusnic`, `OMPI_MCA_mtl=rofi`, a line of a parameter file).
//!
//! Our components are installed beside Open MPI's own, into a component directory
//! every job on the machine reads. A job that names none of them must run exactly
//! as before the install, so each component asks here whether it was named before it
//! competes in the selection or opens anything.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use crate::sys;

/// How a framework's selection variable treats one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// An include list that names it (`btl = self,rusnic`).
    Named,
    /// No list, or an exclude list (`^tcp`): the framework's own default choice.
    Default,
}

/// Reads the framework's selection variable (`btl`, `mtl`, ...) and tells whether it
/// names `component`.
fn selection_of(framework: &str, component: &str) -> Selection {
    classify(framework_list(framework).as_deref(), component)
}

/// Whether `component` takes part in this job: named in its framework's list, or
/// opted in with its own `auto_select` parameter.
pub fn competes(framework: &str, component: &str, auto_select: bool) -> bool {
    auto_select || selection_of(framework, component) == Selection::Named
}

/// The value of the variable named after the framework; `None` when unset or empty.
fn framework_list(framework: &str) -> Option<String> {
    let name = CString::new(framework).ok()?;
    let mut index: c_int = -1;
    // SAFETY: a NUL-terminated name and an out-pointer for the index.
    let rc = unsafe { sys::mca_base_var_find_by_name(name.as_ptr(), &mut index) };
    if rc != sys::OPAL_SUCCESS as c_int || index < 0 {
        return None;
    }
    let mut value: *const *const c_char = std::ptr::null();
    // SAFETY: for a string variable the system stores a pointer to its `char *`
    // storage in `value`; the storage outlives this call (frameworks are registered
    // for the life of the process).
    let rc = unsafe {
        sys::mca_base_var_get_value(
            index,
            (&raw mut value).cast::<c_void>(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc != sys::OPAL_SUCCESS as c_int || value.is_null() {
        return None;
    }
    // SAFETY: checked non-NULL above; the string is NUL-terminated when set.
    let text = unsafe { *value };
    if text.is_null() {
        return None;
    }
    // SAFETY: as above.
    let text = unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned();
    (!text.trim().is_empty()).then_some(text)
}

/// What a selection list says of `component` (the list syntax of
/// `mca_base_component_parse_requested`: names separated by commas, a leading `^`
/// making the whole list an exclude list).
pub fn classify(list: Option<&str>, component: &str) -> Selection {
    let Some(list) = list.map(str::trim) else {
        return Selection::Default;
    };
    if list.starts_with('^') {
        return Selection::Default;
    }
    if list.split(',').any(|name| name.trim() == component) {
        Selection::Named
    } else {
        Selection::Default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lists_name_components_exactly() {
        assert_eq!(classify(Some("self,rusnic"), "rusnic"), Selection::Named);
        assert_eq!(classify(Some(" rofi "), "rofi"), Selection::Named);
        assert_eq!(
            classify(Some("self, rsmcuda ,tcp"), "rsmcuda"),
            Selection::Named
        );
        assert_eq!(classify(Some("self,rusnic2"), "rusnic"), Selection::Default);
        assert_eq!(classify(Some("self,vader"), "rsmcuda"), Selection::Default);
    }

    #[test]
    fn no_list_and_exclude_lists_leave_the_default() {
        assert_eq!(classify(None, "rofi"), Selection::Default);
        assert_eq!(classify(Some("^ofi"), "rofi"), Selection::Default);
        assert_eq!(
            classify(Some("^uct,openib,ofi"), "rusnic"),
            Selection::Default
        );
        assert_eq!(classify(Some("   "), "rusnic"), Selection::Default);
    }
}
