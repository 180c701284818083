//! The bindings reach the real library: the providers this machine has are listed.

use std::ffi::CStr;
use std::ptr;

#[test]
fn getinfo_lists_a_dgram_provider_and_wrappers_link() {
    // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed, owned fi_info freed below.
    let hints = unsafe { fabric_sys::fi_dupinfo(ptr::null()) };
    assert!(!hints.is_null());
    // SAFETY: hints is a valid fi_info with a valid ep_attr allocated by fi_dupinfo.
    unsafe {
        (*(*hints).ep_attr).type_ = fabric_sys::FI_EP_DGRAM;
        (*hints).caps = fabric_sys::FI_MSG;
    }
    let mut info = ptr::null_mut();
    let version = fabric_sys::API_VERSION;
    // SAFETY: valid hints and out-pointer; the list is freed with fi_freeinfo.
    let rc =
        unsafe { fabric_sys::fi_getinfo(version, ptr::null(), ptr::null(), 0, hints, &mut info) };
    assert_eq!(rc, 0, "fi_getinfo(FI_EP_DGRAM) failed: {rc}");
    let mut names = Vec::new();
    let mut cursor = info;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list fi_getinfo returned; prov_name is a C string.
        unsafe {
            names.push(
                CStr::from_ptr((*(*cursor).fabric_attr).prov_name)
                    .to_string_lossy()
                    .into_owned(),
            );
            cursor = (*cursor).next;
        }
    }
    // SAFETY: both were allocated by libfabric and are not used afterwards.
    unsafe {
        fabric_sys::fi_freeinfo(info);
        fabric_sys::fi_freeinfo(hints);
    }
    assert!(
        names.iter().any(|n| n.starts_with("udp")),
        "providers: {names:?}"
    );
}
