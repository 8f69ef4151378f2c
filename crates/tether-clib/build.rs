//! Gives the shared library the name it is installed under.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtether.so");
}
