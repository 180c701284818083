//! Errors of loading the driver and of driver calls.

use std::ffi::c_int;
use std::fmt;

/// A driver call returned a CUresult other than CUDA_SUCCESS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CuError {
    /// The driver function.
    pub call: &'static str,
    /// Its CUresult.
    pub code: c_int,
}

impl fmt::Display for CuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed with CUresult {}", self.call, self.code)
    }
}

impl std::error::Error for CuError {}

/// Why the driver is not usable in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// dlopen failed (no driver installed, or no GPU container runtime).
    NotFound { path: String, reason: String },
    /// The library lacks an entry point we need (too old, or not the driver).
    MissingSymbol { path: String, name: &'static str },
    /// cuInit failed (e.g. CUDA_ERROR_NO_DEVICE = 100).
    Init(CuError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { path, reason } => {
                write!(f, "cannot load the CUDA driver {path}: {reason}")
            }
            Self::MissingSymbol { path, name } => {
                write!(f, "{path} has no {name}: not a (recent enough) CUDA driver")
            }
            Self::Init(e) => write!(f, "the CUDA driver is present but {e}"),
        }
    }
}

impl std::error::Error for LoadError {}
