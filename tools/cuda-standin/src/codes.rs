//! Result codes and enum values of the driver API (numbers as in cuda.h), and the
//! names and descriptions `cuGetErrorName` / `cuGetErrorString` hand out.

pub type CuResult = i32;

pub const SUCCESS: CuResult = 0;
pub const INVALID_VALUE: CuResult = 1;
pub const OUT_OF_MEMORY: CuResult = 2;
pub const NOT_INITIALIZED: CuResult = 3;
pub const NO_DEVICE: CuResult = 100;
pub const INVALID_DEVICE: CuResult = 101;
pub const INVALID_CONTEXT: CuResult = 201;
pub const ALREADY_MAPPED: CuResult = 208;
pub const NOT_MAPPED: CuResult = 211;
pub const PEER_ACCESS_UNSUPPORTED: CuResult = 217;
pub const INVALID_HANDLE: CuResult = 400;
pub const NOT_FOUND: CuResult = 500;
pub const NOT_READY: CuResult = 600;
pub const HOST_MEMORY_ALREADY_REGISTERED: CuResult = 712;
pub const HOST_MEMORY_NOT_REGISTERED: CuResult = 713;
pub const NOT_SUPPORTED: CuResult = 801;
pub const TIMEOUT: CuResult = 909;
pub const UNKNOWN: CuResult = 999;

/// `CUmemorytype`.
pub const MEMORYTYPE_HOST: u32 = 1;
pub const MEMORYTYPE_DEVICE: u32 = 2;

/// `CUevent_flags`.
pub const EVENT_INTERPROCESS: u32 = 0x4;

/// `CUstream_flags`: a stream that does not synchronize with the legacy default stream.
pub const STREAM_NON_BLOCKING: u32 = 0x1;

/// (code, name, description) for every code the stand-in can return, plus the common rest.
const TABLE: &[(CuResult, &str, &str)] = &[
    (0, "CUDA_SUCCESS", "no error"),
    (1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
    (3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
    (4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"),
    (
        100,
        "CUDA_ERROR_NO_DEVICE",
        "no CUDA-capable device is detected",
    ),
    (101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"),
    (201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
    (
        205,
        "CUDA_ERROR_MAP_FAILED",
        "mapping of buffer object failed",
    ),
    (
        206,
        "CUDA_ERROR_UNMAP_FAILED",
        "unmapping of buffer object failed",
    ),
    (208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"),
    (211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"),
    (
        217,
        "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        "peer access is not supported between these two devices",
    ),
    (
        304,
        "CUDA_ERROR_OPERATING_SYSTEM",
        "OS call failed or operation not supported on this OS",
    ),
    (400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
    (500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"),
    (600, "CUDA_ERROR_NOT_READY", "device not ready"),
    (
        700,
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "an illegal memory access was encountered",
    ),
    (
        704,
        "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        "peer access is already enabled",
    ),
    (
        705,
        "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        "peer access has not been enabled",
    ),
    (
        708,
        "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
        "cannot set while device is active in this process",
    ),
    (
        709,
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        "context is destroyed",
    ),
    (
        712,
        "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        "part or all of the requested memory range is already mapped",
    ),
    (
        713,
        "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        "pointer does not correspond to a registered memory region",
    ),
    (800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"),
    (909, "CUDA_ERROR_TIMEOUT", "wait operation timed out"),
    (999, "CUDA_ERROR_UNKNOWN", "unknown error"),
];

/// NUL-terminated static name of `code`, if it is one we know.
pub fn name(code: CuResult) -> Option<&'static [u8]> {
    NAMES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, n, _)| *n)
}

/// NUL-terminated static description of `code`, if it is one we know.
pub fn description(code: CuResult) -> Option<&'static [u8]> {
    NAMES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, _, d)| *d)
}

/// Plain name of `code` for log lines.
pub fn label(code: CuResult) -> &'static str {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map_or("CUDA_ERROR_?", |(_, n, _)| n)
}

/// The table with NUL-terminated strings, built once (C callers keep the pointers).
type Row = (CuResult, &'static [u8], &'static [u8]);

static NAMES: std::sync::LazyLock<Vec<Row>> = std::sync::LazyLock::new(|| {
    TABLE
        .iter()
        .map(|(c, n, d)| {
            let n: &'static [u8] = format!("{n}\0").into_bytes().leak();
            let d: &'static [u8] = format!("{d}\0").into_bytes().leak();
            (*c, n, d)
        })
        .collect()
});
