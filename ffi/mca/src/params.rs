//! MCA variable registration: typed parameters with level, help and validation.
//!
//! Storage handed to `mca_base_component_var_register` must outlive the variable
//! system (it may write into it at any time, e.g. for MPI_T-settable variables),
//! so each parameter's storage is leaked once at registration; a component
//! registers a fixed, small set of parameters once per process.

use std::cell::UnsafeCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ops::RangeInclusive;

use crate::error::{Error, Result};
use crate::strings::lossy_cstring;
use ompi_sys as sys;

/// How much a user must know to care about a parameter (`--level` in ompi_info).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level(u8);

impl Level {
    /// Basic user-facing options (ompi_info level 1).
    pub const USER_BASIC: Level = Level(1);
    pub const USER_DETAIL: Level = Level(2);
    pub const USER_ALL: Level = Level(3);
    pub const TUNER_BASIC: Level = Level(4);
    pub const TUNER_DETAIL: Level = Level(5);
    pub const TUNER_ALL: Level = Level(6);
    pub const DEV_BASIC: Level = Level(7);
    pub const DEV_DETAIL: Level = Level(8);
    pub const DEV_ALL: Level = Level(9);

    fn raw(self) -> sys::mca_base_var_info_lvl_t {
        sys::OPAL_INFO_LVL_1 + (self.0.clamp(1, 9) - 1) as sys::mca_base_var_info_lvl_t
    }
}

/// Storage the variable system writes into; read with a volatile load because C
/// may change it behind Rust's back.
struct Storage<T>(UnsafeCell<T>);

// SAFETY: storage holds plain values or a C string pointer owned by the variable
// system; it writes them only from registration and MPI_T calls, which Open MPI
// serialises, and readers take a volatile copy.
unsafe impl<T> Sync for Storage<T> {}

impl<T: Copy> Storage<T> {
    fn leak(value: T) -> &'static Storage<T> {
        Box::leak(Box::new(Storage(UnsafeCell::new(value))))
    }
    fn get(&self) -> T {
        // SAFETY: the cell is valid for 'static and holds an initialised T.
        unsafe { std::ptr::read_volatile(self.0.get()) }
    }
    fn as_c(&'static self) -> *mut c_void {
        self.0.get().cast()
    }
}

/// A registered parameter of a plain value type.
#[derive(Clone, Copy)]
pub struct Param<T: Copy + 'static> {
    storage: &'static Storage<T>,
    index: c_int,
}

impl<T: Copy + 'static> std::fmt::Debug for Param<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Param(index {})", self.index)
    }
}

impl<T: Copy + 'static> Param<T> {
    /// The current value (default, or what the user set).
    pub fn get(&self) -> T {
        self.storage.get()
    }
    /// The variable's index in the MCA variable system.
    pub fn index(&self) -> c_int {
        self.index
    }
}

impl Param<bool> {
    /// The value of a boolean parameter.
    pub fn enabled(&self) -> bool {
        self.get()
    }
}

/// A registered string parameter (`None` when unset/empty).
#[derive(Clone, Copy)]
pub struct StringParam {
    storage: &'static Storage<*mut c_char>,
}

impl std::fmt::Debug for StringParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StringParam({:?})", self.get())
    }
}

impl StringParam {
    /// The current value; `None` if unset or empty.
    pub fn get(&self) -> Option<String> {
        let ptr = self.storage.get();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: the variable system keeps a NUL-terminated copy in storage.
        let text = unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned();
        (!text.is_empty()).then_some(text)
    }
}

/// Registers one component's parameters and collects validation failures, which
/// `finish` reports together through show_help.
pub struct Registrar {
    component: *const sys::mca_base_component_t,
    prefix: String,
    problems: Vec<String>,
}

impl std::fmt::Debug for Registrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Registrar({})", self.prefix)
    }
}

impl Registrar {
    /// A registrar for the component whose (static) structure is `component`.
    ///
    /// # Safety
    /// `component` must point to the component's exported structure, valid for the
    /// life of the process (it is the `static mut` the host loaded).
    pub unsafe fn new(component: *const sys::mca_base_component_t) -> Registrar {
        // SAFETY: caller guarantees a valid component structure with NUL-terminated names.
        let (ty, name) = unsafe {
            (
                CStr::from_ptr((*component).mca_type_name.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
                CStr::from_ptr((*component).mca_component_name.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        Registrar {
            component,
            prefix: format!("{ty}_{name}"),
            problems: Vec::new(),
        }
    }

    /// The full variable name users type, e.g. `btl_rusnic_window`.
    pub fn full_name(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    fn register(
        &mut self,
        name: &str,
        help: &str,
        ty: sys::mca_base_var_type_t,
        enumerator: *mut sys::mca_base_var_enum_t,
        level: Level,
        storage: *mut c_void,
    ) -> c_int {
        let name_c = lossy_cstring(name);
        let help_c = lossy_cstring(help);
        // SAFETY: valid component, NUL-terminated strings (copied by the callee),
        // storage of the type announced in `ty` valid for 'static.
        let index = unsafe {
            sys::mca_base_component_var_register(
                self.component,
                name_c.as_ptr(),
                help_c.as_ptr(),
                ty,
                enumerator,
                0,
                0,
                level.raw(),
                sys::MCA_BASE_VAR_SCOPE_READONLY,
                storage,
            )
        };
        if index < 0 {
            self.problems.push(format!(
                "{}: registration failed ({index})",
                self.full_name(name)
            ));
        }
        index
    }

    /// An `int` parameter that must lie in `range`.
    pub fn int(
        &mut self,
        name: &str,
        default: i32,
        range: RangeInclusive<i32>,
        level: Level,
        help: &str,
    ) -> Param<i32> {
        self.ranged(
            name,
            default,
            range,
            sys::MCA_BASE_VAR_TYPE_INT,
            level,
            help,
        )
    }

    /// A `size_t` parameter that must lie in `range` (byte counts, limits).
    pub fn size(
        &mut self,
        name: &str,
        default: usize,
        range: RangeInclusive<usize>,
        level: Level,
        help: &str,
    ) -> Param<usize> {
        self.ranged(
            name,
            default,
            range,
            sys::MCA_BASE_VAR_TYPE_SIZE_T,
            level,
            help,
        )
    }

    /// Registers a numeric parameter whose C type is `ty` (matching `T`) and records
    /// a problem if its effective value lies outside `range`.
    fn ranged<T: Copy + PartialOrd + std::fmt::Display + 'static>(
        &mut self,
        name: &str,
        default: T,
        range: RangeInclusive<T>,
        ty: sys::mca_base_var_type_t,
        level: Level,
        help: &str,
    ) -> Param<T> {
        let storage = Storage::leak(default);
        let help = format!("{help} [{}..{}]", range.start(), range.end());
        let index = self.register(name, &help, ty, std::ptr::null_mut(), level, storage.as_c());
        let value = storage.get();
        if !range.contains(&value) {
            self.problems.push(format!(
                "{} = {value} is out of range: it must be between {} and {}",
                self.full_name(name),
                range.start(),
                range.end()
            ));
        }
        Param { storage, index }
    }

    /// A boolean parameter (`0/1`, `true/false`, `yes/no` on the command line).
    pub fn bool(&mut self, name: &str, default: bool, level: Level, help: &str) -> Param<bool> {
        let storage = Storage::leak(default);
        let index = self.register(
            name,
            help,
            sys::MCA_BASE_VAR_TYPE_BOOL,
            std::ptr::null_mut(),
            level,
            storage.as_c(),
        );
        Param { storage, index }
    }

    /// A string parameter; `validate` returns a reason when a set value is unusable.
    pub fn string(
        &mut self,
        name: &str,
        default: Option<&str>,
        level: Level,
        help: &str,
        validate: impl Fn(&str) -> std::result::Result<(), String>,
    ) -> StringParam {
        let initial: *mut c_char = match default {
            // Leaked: the variable system keeps (and later frees) its own strdup.
            Some(text) => CString::new(text).expect("defaults have no NUL").into_raw(),
            None => std::ptr::null_mut(),
        };
        let storage = Storage::leak(initial);
        self.register(
            name,
            help,
            sys::MCA_BASE_VAR_TYPE_STRING,
            std::ptr::null_mut(),
            level,
            storage.as_c(),
        );
        let param = StringParam { storage };
        if let Some(value) = param.get()
            && let Err(reason) = validate(&value)
        {
            self.problems.push(format!(
                "{} = \"{value}\" is invalid: {reason}",
                self.full_name(name)
            ));
        }
        param
    }

    /// An enumerated parameter: users give one of the names (or its number).
    pub fn enumeration(
        &mut self,
        name: &str,
        default: i32,
        values: &[(i32, &str)],
        level: Level,
        help: &str,
    ) -> Param<i32> {
        // The enum object copies nothing it does not need, but its value table must
        // stay valid: leak the strings and the table with the variable.
        let names: Vec<&'static CStr> = values
            .iter()
            .map(|(_, n)| {
                &*Box::leak(
                    CString::new(*n)
                        .expect("enum names have no NUL")
                        .into_boxed_c_str(),
                )
            })
            .collect();
        let mut table: Vec<sys::mca_base_var_enum_value_t> = values
            .iter()
            .zip(&names)
            .map(|((v, _), n)| sys::mca_base_var_enum_value_t {
                value: *v,
                string: n.as_ptr(),
            })
            .collect();
        table.push(sys::mca_base_var_enum_value_t {
            value: 0,
            string: std::ptr::null(),
        });
        let table: &'static [sys::mca_base_var_enum_value_t] = Box::leak(table.into_boxed_slice());
        let enum_name = lossy_cstring(&self.full_name(name));
        let mut enumerator: *mut sys::mca_base_var_enum_t = std::ptr::null_mut();
        // SAFETY: NUL-terminated name; the table is terminated by a NULL string and lives forever.
        let rc = unsafe {
            sys::mca_base_var_enum_create(enum_name.as_ptr(), table.as_ptr(), &mut enumerator)
        };
        if rc != 0 || enumerator.is_null() {
            self.problems.push(format!(
                "{}: cannot create its enumerator ({rc})",
                self.full_name(name)
            ));
        }
        let storage = Storage::leak(default as c_int);
        let listed = values
            .iter()
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(", ");
        let help = format!("{help} (one of: {listed})");
        let index = self.register(
            name,
            &help,
            sys::MCA_BASE_VAR_TYPE_INT,
            enumerator,
            level,
            storage.as_c(),
        );
        if !enumerator.is_null() {
            // SAFETY: the variable took its own reference; drop ours (OBJ_RELEASE).
            unsafe { crate::object::release(enumerator.cast()) };
        }
        let value = storage.get();
        if !values.iter().any(|(v, _)| *v == value) {
            self.problems.push(format!(
                "{} = {value} is not one of: {listed}",
                self.full_name(name)
            ));
        }
        Param { storage, index }
    }

    /// Records a problem found by a cross-parameter check (e.g. mutually exclusive lists).
    pub fn reject(&mut self, problem: String) {
        self.problems.push(problem);
    }

    /// Reports every invalid value in one show_help message and fails registration.
    pub fn finish(self) -> Result<()> {
        if self.problems.is_empty() {
            return Ok(());
        }
        let list = self
            .problems
            .iter()
            .map(|p| format!("  {p}"))
            .collect::<Vec<_>>()
            .join("\n");
        crate::help::show_help(
            "help-rmca.txt",
            "invalid parameter",
            true,
            &[&self.prefix, &list],
        );
        Err(Error::BAD_PARAM)
    }
}
