//! The test layout (docs/tests.md, "How the tests are built"): with `autotests = false`, a
//! file in tests/ runs only if tests/suite.rs includes it or Cargo.toml names it as a
//! binary of its own. A new file in neither would never run; one in both, twice.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn every_test_file_runs_exactly_once() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs") && name != "suite.rs")
        .collect();
    let suite = read("tests/suite.rs");
    let modules: Vec<String> = suite
        .lines()
        .filter_map(|l| l.strip_prefix("#[path = \"")?.strip_suffix("\"]"))
        .filter(|p| !p.contains('/'))
        .map(str::to_owned)
        .collect();
    let cargo = read("Cargo.toml");
    assert!(cargo.contains("\nautotests = false\n"));
    let binaries: Vec<String> = cargo
        .lines()
        .filter_map(|l| l.strip_prefix("path = \"tests/")?.strip_suffix('"'))
        .filter(|p| *p != "suite.rs")
        .map(str::to_owned)
        .collect();
    let mut seen = BTreeSet::new();
    for file in modules.iter().chain(&binaries) {
        assert!(seen.insert(file.clone()), "{file} runs twice");
        assert!(files.contains(file), "{file} is named but not in tests/");
    }
    let missing: Vec<&String> = files.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "in neither tests/suite.rs nor Cargo.toml's [[test]], so never run: {missing:?}"
    );
    // The files kept apart say why in their own docs; the suite's doc names the reasons.
    assert!(
        binaries.len() <= 12,
        "{binaries:?}: each binary links every dependency"
    );
}
