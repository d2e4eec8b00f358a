//! The target the suite is compiled for, for tests/suite/lib.rs: with
//! `cargo test --target TRIPLE` cargo puts the suite, and the engine
//! binary the suite builds, under `TARGET_DIR/TRIPLE/PROFILE/`.
fn main() {
    println!("cargo:rustc-env=SUITE_TARGET={}", std::env::var("TARGET").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
}
