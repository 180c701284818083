//! OPAL/OMPI return codes as a Rust error type.
//!
//! OMPI codes equal their OPAL counterparts for everything a component returns
//! (`OMPI_ERR_OUT_OF_RESOURCE == OPAL_ERR_OUT_OF_RESOURCE`, ...), so one type serves
//! both frameworks.

use std::ffi::c_int;
use std::fmt;

use ompi_sys as sys;

/// A non-success OPAL/OMPI return code.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error(c_int);

/// The result of every fallible call in the safe layer.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub const ERROR: Error = Error(sys::OPAL_ERROR);
    pub const OUT_OF_RESOURCE: Error = Error(sys::OPAL_ERR_OUT_OF_RESOURCE);
    pub const TEMP_OUT_OF_RESOURCE: Error = Error(sys::OPAL_ERR_TEMP_OUT_OF_RESOURCE);
    pub const RESOURCE_BUSY: Error = Error(sys::OPAL_ERR_RESOURCE_BUSY);
    pub const BAD_PARAM: Error = Error(sys::OPAL_ERR_BAD_PARAM);
    pub const NOT_FOUND: Error = Error(sys::OPAL_ERR_NOT_FOUND);
    pub const NOT_AVAILABLE: Error = Error(sys::OPAL_ERR_NOT_AVAILABLE);
    pub const NOT_SUPPORTED: Error = Error(sys::OPAL_ERR_NOT_SUPPORTED);
    pub const UNREACH: Error = Error(sys::OPAL_ERR_UNREACH);
    pub const WOULD_BLOCK: Error = Error(sys::OPAL_ERR_WOULD_BLOCK);
    pub const VALUE_OUT_OF_BOUNDS: Error = Error(sys::OPAL_ERR_VALUE_OUT_OF_BOUNDS);

    /// Wraps a code returned by C; `None` for success (zero) and positive values.
    pub fn from_code(code: c_int) -> Option<Error> {
        (code < 0).then_some(Error(code))
    }

    /// The C value of this error.
    pub fn code(self) -> c_int {
        self.0
    }
}

/// Turns a C return code into a `Result`, as Rust-for-Linux's `to_result` does.
pub fn to_result(code: c_int) -> Result<c_int> {
    match Error::from_code(code) {
        Some(e) => Err(e),
        None => Ok(code),
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({} {})", self.0, self.name())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn name(self) -> &'static str {
        match self.0 {
            sys::OPAL_ERROR => "OPAL_ERROR",
            sys::OPAL_ERR_OUT_OF_RESOURCE => "OPAL_ERR_OUT_OF_RESOURCE",
            sys::OPAL_ERR_TEMP_OUT_OF_RESOURCE => "OPAL_ERR_TEMP_OUT_OF_RESOURCE",
            sys::OPAL_ERR_RESOURCE_BUSY => "OPAL_ERR_RESOURCE_BUSY",
            sys::OPAL_ERR_BAD_PARAM => "OPAL_ERR_BAD_PARAM",
            sys::OPAL_ERR_NOT_FOUND => "OPAL_ERR_NOT_FOUND",
            sys::OPAL_ERR_NOT_AVAILABLE => "OPAL_ERR_NOT_AVAILABLE",
            sys::OPAL_ERR_NOT_SUPPORTED => "OPAL_ERR_NOT_SUPPORTED",
            sys::OPAL_ERR_UNREACH => "OPAL_ERR_UNREACH",
            sys::OPAL_ERR_WOULD_BLOCK => "OPAL_ERR_WOULD_BLOCK",
            sys::OPAL_ERR_VALUE_OUT_OF_BOUNDS => "OPAL_ERR_VALUE_OUT_OF_BOUNDS",
            _ => "OPAL error",
        }
    }
}

/// Converts a `Result` into the C convention: `OPAL_SUCCESS` or the error code.
pub fn to_code(result: Result<()>) -> c_int {
    match result {
        Ok(()) => sys::OPAL_SUCCESS as c_int,
        Err(e) => e.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_positive_codes_are_not_errors() {
        assert_eq!(to_result(0), Ok(0));
        assert_eq!(to_result(1), Ok(1));
        assert_eq!(to_result(sys::OPAL_ERR_UNREACH), Err(Error::UNREACH));
        assert_eq!(to_code(Err(Error::BAD_PARAM)), sys::OPAL_ERR_BAD_PARAM);
        assert_eq!(
            format!("{}", Error::UNREACH),
            format!("OPAL_ERR_UNREACH ({})", sys::OPAL_ERR_UNREACH)
        );
    }
}
