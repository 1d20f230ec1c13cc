//! The repository's documentation as the docs tests read it: README.md and docs/*.md.

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/, with their paths relative to the root.
pub fn pages() -> Vec<(String, String)> {
    let mut pages = vec![("README.md".to_owned(), read("README.md"))];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for path in docs {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        pages.push((name.clone(), read(&name)));
    }
    pages
}

pub fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}
