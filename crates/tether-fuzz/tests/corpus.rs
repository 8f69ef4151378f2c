//! Replays the committed fuzz corpora (fuzz/corpus/<target>/) and the
//! inputs of past findings (fuzz/regressions/<target>/) through the
//! targets, on stable Rust: a change that makes a target panic on any of
//! them fails here without cargo-fuzz.

use std::fs;
use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(entries) => {
            let mut files: Vec<PathBuf> = entries
                .map(|e| e.expect("directory entry").path())
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            files
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}

#[test]
fn every_corpus_and_regression_input_passes() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, target) in tether_fuzz::TARGETS {
        let corpus = inputs(&fuzz.join("corpus").join(name));
        assert!(
            !corpus.is_empty(),
            "no corpus for target {name} in {}",
            fuzz.display()
        );
        let regressions = inputs(&fuzz.join("regressions").join(name));
        for path in corpus.iter().chain(&regressions) {
            let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let result = std::panic::catch_unwind(|| target(&data));
            assert!(
                result.is_ok(),
                "target {name} panicked on {}",
                path.display()
            );
        }
    }
}
