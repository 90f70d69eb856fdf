//! Links the cdylib as `libibverbs.so.1` with rdma-core's version nodes.
//!
//! rustc hands the linker its own anonymous version script (every exported
//! Rust item, then `local: *`). The entry points of src/exports.rs are
//! therefore not `#[no_mangle]` items but assembler aliases that rustc does
//! not list, so the nodes of libibverbs.map are the ones that version them.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libibverbs.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibverbs.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
}
