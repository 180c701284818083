//! `cfg(ompi5)` when ompi-sys was generated from an Open MPI 5.x: the interface types
//! this crate adapts between the series (BTL 3.1 vs 3.3 receive callbacks, the MTL
//! component's init, communicator ids) are the only things it decides with it; `cfg(ompi6)`
//! (6.0) decides the buffered-send buffer's functions.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(ompi5)");
    println!("cargo::rustc-check-cfg=cfg(ompi6)");
    println!("cargo:rerun-if-env-changed=DEP_OPEN_PAL_SERIES");
    let series: u32 = std::env::var("DEP_OPEN_PAL_SERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    if series >= 5 {
        println!("cargo:rustc-cfg=ompi5");
    }
    // 6.0: the interfaces of 5.0, communicator-attached buffered-send buffers.
    if series >= 6 {
        println!("cargo:rustc-cfg=ompi6");
    }
}
