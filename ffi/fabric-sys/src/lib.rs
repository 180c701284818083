//! Raw bindings over the libfabric that pkg-config finds (the system's 1.17, or the
//! 2.1 of configure-support/libfabric2 with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig),
//! generated from its installed headers.
//!
//! libfabric's data-path API (`fi_send`, `fi_cq_read`, `fi_tsend`, ...) is `static
//! inline` dispatch through provider ops tables; bindgen's `wrap_static_fns`
//! turns each into a real function compiled here, so the names are the ones
//! the man pages use. Flag macros are bound as `u64` (the API's width).
//!
//! Every difference between the libfabric series our components are built against
//! lives here: [`API_VERSION`] (what `fi_getinfo` is asked for) and
//! [`check_runtime_version`] (the library loaded at run time against the headers).

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all, clippy::undocumented_unsafe_blocks)]
#![allow(unsafe_op_in_unsafe_fn)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

// The functions libfabric's headers declare, under their own names: shim/load.c
// defines them, loading libfabric.so.1 on first use (build.rs renames them in the
// headers so that the static-inline wrappers call them too).
pub use self::{
    rmca_fi_dupinfo as fi_dupinfo, rmca_fi_fabric as fi_fabric, rmca_fi_freeinfo as fi_freeinfo,
    rmca_fi_getinfo as fi_getinfo, rmca_fi_strerror as fi_strerror, rmca_fi_version as fi_version,
};

unsafe extern "C" {
    /// NULL once libfabric.so.1 is loaded and every function bound, else why not
    /// (a NUL-terminated string that lives for the process).
    fn rmca_fabric_load() -> *const std::os::raw::c_char;
}

/// Loads libfabric.so.1 into the process (once; it stays): an error names what is
/// missing, the library or a function at the version this build binds.
pub fn load() -> Result<(), String> {
    // SAFETY: takes nothing; returns NULL or a static NUL-terminated string.
    let why = unsafe { rmca_fabric_load() };
    if why.is_null() {
        Ok(())
    } else {
        // SAFETY: non-NULL: shim/load.c's static buffer, written once before this returns.
        Err(unsafe { std::ffi::CStr::from_ptr(why) }
            .to_string_lossy()
            .into_owned())
    }
}

/// `FI_VERSION(major, minor)` from fabric.h.
pub const fn fi_version_of(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// `(major, minor)` of an `FI_VERSION` number.
pub const fn version_parts(v: u32) -> (u32, u32) {
    (v >> 16, v & 0xffff)
}

/// The version of the headers these bindings were generated from
/// (`FI_MAJOR_VERSION`, `FI_MINOR_VERSION`).
pub const HEADER_VERSION: u32 = fi_version_of(FI_MAJOR_VERSION as u32, FI_MINOR_VERSION as u32);

/// The API version our components pass to `fi_getinfo`, from the headers found.
///
/// On 1.x it stays at 1.5, the semantics Open MPI's ofi MTL asks for and the ones
/// rofi and rusnic were written and tested against (mr_mode bits rather than
/// FI_MR_BASIC/SCALABLE, 1.5's error entries). On 2.x it is the headers' own
/// version: a 2.x library gives a caller asking for 1.x the 1.x structure layouts
/// and behaviour through its compatibility paths (`fi_cq_err_entry` is copied at
/// its 1.1 size below 1.20, for one), while these bindings have 2.x's layouts; and
/// 2.0 removed API (old MR modes, FI_ORDER_NONE/STRICT/DATA, `total_buffered_recv`)
/// that a 1.x request would otherwise still be allowed to lean on.
pub const API_VERSION: u32 = api_version_for(HEADER_VERSION);

/// [`API_VERSION`]'s rule, for any header version.
pub const fn api_version_for(headers: u32) -> u32 {
    if version_parts(headers).0 >= 2 {
        headers
    } else {
        fi_version_of(1, 5)
    }
}

/// The domain's data progress model: `data_progress`, which 2.x put in an anonymous
/// union with its successor `progress` (same storage, same type).
#[cfg(fabric_v2)]
pub fn data_progress(attr: &fi_domain_attr) -> fi_progress {
    // SAFETY: both members of the union are `enum fi_progress`.
    unsafe { attr.__bindgen_anon_1.progress }
}

/// The domain's data progress model (`data_progress`, 1.x).
#[cfg(not(fabric_v2))]
pub fn data_progress(attr: &fi_domain_attr) -> fi_progress {
    attr.data_progress
}

/// Sets [`data_progress`] (2.x: through `progress`, the union's current name).
#[cfg(fabric_v2)]
pub fn set_data_progress(attr: &mut fi_domain_attr, progress: fi_progress) {
    attr.__bindgen_anon_1.progress = progress;
}

/// Sets [`data_progress`].
#[cfg(not(fabric_v2))]
pub fn set_data_progress(attr: &mut fi_domain_attr, progress: fi_progress) {
    attr.data_progress = progress;
}

/// The version of the libfabric loaded in this process (`fi_version()`, not the
/// headers').
pub fn runtime_version() -> u32 {
    // SAFETY: fi_version takes nothing and returns a number.
    unsafe { fi_version() }
}

/// Why a library of version `loaded` cannot serve code built against headers of
/// version `built`: older than the headers means structures these bindings lay out
/// (and API they call) that it does not know.
pub fn version_mismatch(built: u32, loaded: u32) -> Option<String> {
    if loaded >= built {
        return None;
    }
    let (bm, bn) = version_parts(built);
    let (lm, ln) = version_parts(loaded);
    Some(format!(
        "the libfabric loaded at run time is {lm}.{ln}, older than the libfabric {bm}.{bn} \
         this component was built against (put the {bm}.{bn} library first on \
         LD_LIBRARY_PATH, or rebuild against {lm}.{ln})"
    ))
}

/// Loads the library ([`load`]), then [`version_mismatch`] of it against the headers:
/// components call this before anything else of libfabric and decline with the message.
pub fn check_runtime_version() -> Result<(), String> {
    load()?;
    version_mismatch(HEADER_VERSION, runtime_version()).map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_is_1_5_on_1x_headers_and_the_headers_own_on_2x() {
        assert_eq!(api_version_for(fi_version_of(1, 17)), fi_version_of(1, 5));
        assert_eq!(api_version_for(fi_version_of(1, 22)), fi_version_of(1, 5));
        assert_eq!(api_version_for(fi_version_of(2, 0)), fi_version_of(2, 0));
        assert_eq!(api_version_for(fi_version_of(2, 1)), fi_version_of(2, 1));
        assert_eq!(API_VERSION, api_version_for(HEADER_VERSION));
    }

    #[test]
    fn an_older_library_is_named_with_both_versions_and_a_newer_one_passes() {
        let built = fi_version_of(2, 1);
        let msg = version_mismatch(built, fi_version_of(1, 17)).expect("1.17 < 2.1");
        assert!(msg.contains("loaded at run time is 1.17"), "{msg}");
        assert!(
            msg.contains("the libfabric 2.1 this component was built against"),
            "{msg}"
        );
        assert!(version_mismatch(built, fi_version_of(2, 0)).is_some());
        assert_eq!(version_mismatch(built, built), None);
        assert_eq!(version_mismatch(built, fi_version_of(2, 2)), None);
        assert_eq!(
            version_mismatch(fi_version_of(1, 17), fi_version_of(2, 1)),
            None
        );
    }

    #[test]
    fn data_progress_is_set_and_read_through_either_layout() {
        let mut attr = fi_domain_attr::default();
        set_data_progress(&mut attr, FI_PROGRESS_MANUAL);
        assert_eq!(data_progress(&attr), FI_PROGRESS_MANUAL);
        set_data_progress(&mut attr, FI_PROGRESS_AUTO);
        assert_eq!(data_progress(&attr), FI_PROGRESS_AUTO);
    }

    #[test]
    fn the_library_loaded_in_tests_is_the_one_built_against_or_newer() {
        // The test binary links the library pkg-config found; with
        // LD_LIBRARY_PATH pointing elsewhere this fails with the message.
        assert_eq!(check_runtime_version(), Ok(()));
        assert!(version_parts(runtime_version()).0 >= 1);
    }
}
