//! Compile-time filling of the fixed-size `char` arrays in component structs.

use std::ffi::c_char;

/// Copies `text` into a NUL-padded array; fails the build if it does not fit
/// (the last byte must stay NUL).
pub const fn c_array<const N: usize>(text: &str) -> [c_char; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() < N, "name does not fit the C field");
    let mut out = [0 as c_char; N];
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i] != 0, "name contains NUL");
        out[i] = bytes[i] as c_char;
        i += 1;
    }
    out
}

/// Byte-wise string equality usable in `const` assertions.
pub const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A `CString` from text that may contain NULs (they are replaced), for messages.
pub fn lossy_cstring(text: &str) -> std::ffi::CString {
    std::ffi::CString::new(text.replace('\0', "\\0")).expect("NULs were replaced")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_nul_padded() {
        const A: [c_char; 8] = c_array("btl");
        assert_eq!(
            &A[..4],
            &[b'b' as c_char, b't' as c_char, b'l' as c_char, 0]
        );
        assert!(const_str_eq("rusnic", "rusnic"));
        assert!(!const_str_eq("rusnic", "rusni"));
    }
}
