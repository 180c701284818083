//! The library these bindings link against is the one their headers describe.

use std::ffi::CStr;

#[test]
fn linked_open_pal_reports_the_version_we_were_built_against() {
    // SAFETY: `opal_version_string` is a NUL-terminated constant array exported by
    // libopen-pal; reading it needs no initialisation of the library.
    let runtime = unsafe { CStr::from_ptr(ompi_sys::opal_version_string.as_ptr()) };
    assert_eq!(
        runtime.to_str().unwrap(),
        ompi_sys::versions::BUILT_AGAINST_VERSION_STRING
    );
}

#[test]
fn descriptor_and_module_layouts_match_the_non_cuda_headers() {
    // The module struct ends with 256 bytes of padding reserved by btl.h.
    let module = std::mem::size_of::<ompi_sys::mca_btl_base_module_t>();
    assert!(module > 256, "module struct is {module} bytes");
    assert_eq!(ompi_sys::versions::BTL_TYPE_VERSION, [3, 1, 0]);
    assert_eq!(ompi_sys::versions::MTL_TYPE_VERSION, [2, 0, 0]);
    assert!(!ompi_sys::versions::BUILT_WITH_CUDA_SUPPORT || module > 300);
}
