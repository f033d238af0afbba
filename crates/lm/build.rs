//! Bakes libtorch's library folder into the binaries' rpath, so they run without LD_LIBRARY_PATH,
//! and keeps libtorch (with its CUDA parts, where present) linked even if no symbol is used directly.
fn main() {
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={lib}");
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch");
    }
}
