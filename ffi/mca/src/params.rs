//! MCA variable registration: typed parameters with level, help and validation.
//!
//! Storage handed to `mca_base_component_var_register` must outlive the variable
//! system (it may write into it at any time, e.g. for MPI_T-settable variables),
//! so each parameter's storage is leaked at its first registration. A component
//! registers again when Open MPI opens its framework again in the same process (a
//! second MPI Session): while its shared object stayed loaded, or where it is linked
//! into libmpi, that registration gets the same storage back (by variable name),
//! which the parameters kept from the first still read.

use std::any::Any;
use std::cell::UnsafeCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ops::RangeInclusive;
use std::sync::{Mutex, PoisonError};

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
// SAFETY: as above; only shared references to it are ever handed around.
unsafe impl<T> Send for Storage<T> {}

/// Every variable's storage, by full name (see the module's note on registering
/// again).
static STORAGES: Mutex<Vec<(String, &'static (dyn Any + Send + Sync))>> = Mutex::new(Vec::new());

impl<T: Copy + 'static> Storage<T> {
    /// The storage of variable `full_name`, holding `value`: made (and leaked) at the
    /// variable's first registration in this process, the same one at the next.
    fn of_variable(full_name: &str, value: T) -> &'static Storage<T> {
        let mut known = STORAGES.lock().unwrap_or_else(PoisonError::into_inner);
        let found = known
            .iter()
            .find(|(name, _)| name == full_name)
            .and_then(|(_, storage)| storage.downcast_ref::<Storage<T>>());
        match found {
            Some(storage) => {
                // SAFETY: registration runs before the variable system may write the
                // storage again (it deregistered the variable at close), and Open MPI
                // registers from one thread.
                unsafe { std::ptr::write_volatile(storage.0.get(), value) };
                storage
            }
            None => {
                let storage: &'static Storage<T> =
                    Box::leak(Box::new(Storage(UnsafeCell::new(value))));
                known.push((full_name.to_owned(), storage));
                storage
            }
        }
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
        // A value the variable system cannot store (not a number, not an int, not a
        // listed word) fails registration; the caller reports it with what is allowed.
        if index < 0 && given(&self.full_name(name)).is_none() {
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
    /// a problem if the value given or its effective value lies outside `range`.
    fn ranged<T: Number>(
        &mut self,
        name: &str,
        default: T,
        range: RangeInclusive<T>,
        ty: sys::mca_base_var_type_t,
        level: Level,
        help: &str,
    ) -> Param<T> {
        let storage = Storage::of_variable(&self.full_name(name), default);
        let help = format!("{help} [{}..{}]", range.start(), range.end());
        let index = self.register(name, &help, ty, std::ptr::null_mut(), level, storage.as_c());
        let value = if index < 0 { default } else { storage.get() };
        let given = given(&self.full_name(name));
        if self.check_number(name, value, &range)
            && index < 0
            && let Some(text) = given
        {
            // The variable system refused a value this check would take.
            self.problems.push(format!(
                "{} = \"{text}\" was refused by Open MPI: it must be between {} and {}",
                self.full_name(name),
                range.start(),
                range.end()
            ));
        }
        Param { storage, index }
    }

    /// Checks a numeric variable that is already registered (e.g. by a framework base
    /// for this component): the value given (the variable system keeps no original
    /// string, so it is read from the environment, where mpirun also puts `--mca`
    /// values for ranks) must be a number without junk that lies in `range`, and so must
    /// the stored `value` (it may come from a parameter file). One problem at most.
    /// Returns whether the value is usable.
    pub fn check_number<T: Number>(
        &mut self,
        name: &str,
        value: T,
        range: &RangeInclusive<T>,
    ) -> bool {
        let (lo, hi) = (range.start().wide(), range.end().wide());
        let full = self.full_name(name);
        let allowed = format!("it must be between {} and {}", range.start(), range.end());
        if let Some(text) = given(&full) {
            match parse_number(&text) {
                Err(why) => {
                    self.problems
                        .push(format!("{full} = \"{text}\" is {why}: {allowed}"));
                    return false;
                }
                Ok(n) if !(lo..=hi).contains(&n) => {
                    self.problems
                        .push(format!("{full} = {text} is out of range: {allowed}"));
                    return false;
                }
                Ok(_) => {}
            }
        }
        if !(lo..=hi).contains(&value.wide()) {
            self.problems
                .push(format!("{full} = {value} is out of range: {allowed}"));
            return false;
        }
        true
    }

    /// An `int` parameter that must be a power of two within `range` (ring sizes).
    pub fn int_power_of_two(
        &mut self,
        name: &str,
        default: i32,
        range: RangeInclusive<i32>,
        level: Level,
        help: &str,
    ) -> Param<i32> {
        let help = format!("{help}; a power of two");
        let problems = self.problems.len();
        let param = self.int(name, default, range.clone(), level, &help);
        let value = param.get();
        if self.problems.len() == problems && !value.unsigned_abs().is_power_of_two() {
            self.problems.push(format!(
                "{} = {value} is not a power of two: it must be a power of two between {} \
                 and {}",
                self.full_name(name),
                range.start(),
                range.end()
            ));
        }
        param
    }

    /// A boolean parameter (`0/1`, `true/false`, `yes/no` on the command line).
    pub fn bool(&mut self, name: &str, default: bool, level: Level, help: &str) -> Param<bool> {
        let storage = Storage::of_variable(&self.full_name(name), default);
        let index = self.register(
            name,
            help,
            sys::MCA_BASE_VAR_TYPE_BOOL,
            std::ptr::null_mut(),
            level,
            storage.as_c(),
        );
        let full = self.full_name(name);
        match given(&full) {
            Some(text) if index < 0 || parse_bool(&text).is_none() => {
                self.problems.push(format!(
                    "{full} = \"{text}\" is not a boolean: it must be one of {BOOL_WORDS}"
                ));
            }
            _ => {}
        }
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
        let storage = Storage::of_variable(&self.full_name(name), initial);
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
        let storage = Storage::of_variable(&self.full_name(name), default as c_int);
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
        let full = self.full_name(name);
        let known = |text: &str| {
            values.iter().any(|(v, n)| {
                n.eq_ignore_ascii_case(text) || parse_number(text).ok() == Some(i128::from(*v))
            })
        };
        match given(&full) {
            Some(text) if index < 0 || !known(&text) => self
                .problems
                .push(format!("{full} = \"{text}\" is not one of: {listed}")),
            _ if index >= 0 && !values.iter().any(|(v, _)| *v == value) => self
                .problems
                .push(format!("{full} = {value} is not one of: {listed}")),
            _ => {}
        }
        Param { storage, index }
    }

    /// Whether a value has been found unusable so far (cross-parameter checks of
    /// values already reported would only repeat them).
    pub fn has_problems(&self) -> bool {
        !self.problems.is_empty()
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

/// Numeric parameter types, widened losslessly for range checks.
pub trait Number: Copy + PartialOrd + std::fmt::Display + 'static {
    fn wide(self) -> i128;
}

impl Number for i32 {
    fn wide(self) -> i128 {
        i128::from(self)
    }
}

impl Number for u32 {
    fn wide(self) -> i128 {
        i128::from(self)
    }
}

impl Number for usize {
    fn wide(self) -> i128 {
        i128::try_from(self).unwrap_or(i128::MAX)
    }
}

/// The prefix under which Open MPI looks up parameters in the environment.
const ENV_PREFIX: &str = "OMPI_MCA_";

/// The text a user gave for `full_name` (environment or mpirun's `--mca`), if any.
fn given(full_name: &str) -> Option<String> {
    std::env::var_os(format!("{ENV_PREFIX}{full_name}"))
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.trim().is_empty())
}

/// Parses a number as Open MPI's variable system does (decimal, `0x` hex, leading-0
/// octal, an optional `k`/`m`/`g` binary suffix) but strictly: a sign is kept, and junk,
/// a missing number or one beyond 64 bits is an error, where `strtoull` would wrap,
/// saturate or return 0.
pub fn parse_number(text: &str) -> std::result::Result<i128, &'static str> {
    let text = text.trim();
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (rest, shift) = match rest.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') => (&rest[..rest.len() - 1], 10),
        Some(b'm') => (&rest[..rest.len() - 1], 20),
        Some(b'g') => (&rest[..rest.len() - 1], 30),
        _ => (rest, 0),
    };
    let (digits, radix) =
        if let Some(hex) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            (hex, 16)
        } else if rest.len() > 1 && rest.starts_with('0') {
            (&rest[1..], 8)
        } else {
            (rest, 10)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err("not a number");
    }
    let magnitude = u64::from_str_radix(digits, radix)
        .ok()
        .and_then(|v| v.checked_mul(1u64 << shift))
        .ok_or("too large")?;
    let value = i128::from(magnitude);
    Ok(if negative { -value } else { value })
}

/// The words (and numbers) a boolean parameter accepts.
const BOOL_WORDS: &str = "1, 0, true, false, yes, no, enabled, disabled (t, f, y, n)";

/// A boolean as given by a user, strictly (Open MPI takes any number as true); the
/// words are case-sensitive, as in Open MPI.
fn parse_bool(text: &str) -> Option<bool> {
    match text.trim_start() {
        "1" | "true" | "t" | "yes" | "y" | "enabled" => Some(true),
        "0" | "false" | "f" | "no" | "n" | "disabled" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_like_open_mpi_but_strictly() {
        assert_eq!(parse_number("4096"), Ok(4096));
        assert_eq!(parse_number("0x10"), Ok(16));
        assert_eq!(parse_number("010"), Ok(8));
        assert_eq!(parse_number("0"), Ok(0));
        assert_eq!(parse_number("64k"), Ok(65536));
        assert_eq!(parse_number("1G"), Ok(1 << 30));
        assert_eq!(parse_number("-1"), Ok(-1));
        assert_eq!(parse_number(" 7 "), Ok(7));
        assert_eq!(parse_number("999999999999"), Ok(999_999_999_999));
        assert_eq!(parse_number("abc"), Err("not a number"));
        assert_eq!(parse_number("12x"), Err("not a number"));
        assert_eq!(parse_number("1.5"), Err("not a number"));
        assert_eq!(parse_number("k"), Err("not a number"));
        assert_eq!(parse_number("08"), Err("not a number"));
        assert_eq!(parse_number("99999999999999999999"), Err("too large"));
        assert_eq!(parse_number("99999999999G"), Err("too large"));
    }

    #[test]
    fn booleans_are_words_or_zero_and_one() {
        assert_eq!(parse_bool("yes"), Some(true));
        assert_eq!(parse_bool(" t"), Some(true));
        assert_eq!(parse_bool("TRUE"), None);
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("2"), None);
        assert_eq!(parse_bool("maybe"), None);
    }
}
