//! The shared library must answer to `dlopen("libcuda.so.1")` and `-lcuda`, and must not
//! be unloaded by `dlclose` (Open MPI 4.1.4 closes the driver at finalize while our
//! destructor, which unlinks /dev/shm files, still has to run at exit).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
