//! `include/tether.h` is generated from this crate and committed; this test
//! fails when the two differ. `TETHER_UPDATE_HEADER=1 cargo test -p
//! tether-capi --test header` (or `make header`) rewrites it.

#[test]
fn committed_header_matches_the_generated_one() {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("header generates")
        .write(&mut generated);
    let path = format!("{crate_dir}/../../include/tether.h");
    if std::env::var_os("TETHER_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write header");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/tether.h differs from the header generated from crates/tether-capi: run `make header` and commit it"
    );
}
