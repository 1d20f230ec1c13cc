//! Dependencies point down (shared/STYLE.md): no import circle between modules.
//!
//! Read every `crate::…` and `super::…` path in src/ (a text scan of `use` items and
//! qualified paths, comments skipped), resolve each to the module it names, and check, at
//! every level of the module tree, that the modules side by side (siblings, each counted
//! with everything below it) depend on each other without a cycle. A submodule using its
//! parent's items is its parent's own business (an `impl` split into a file) and is not a
//! sibling edge. Test modules (`tests.rs`, `tests/`, and what follows `#[cfg(test)]`) are
//! not what ships and are left out. Limits: paths built by macros and `self::` re-exports
//! are not seen; a `use` of a glob counts as a use of the module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `a::b` for src/a/b.rs and src/a/b/mod.rs; `` for src/lib.rs.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_owned())
}

fn join(base: &str, path: &str) -> String {
    match (base.is_empty(), path.is_empty()) {
        (true, _) => path.to_owned(),
        (_, true) => base.to_owned(),
        _ => format!("{base}::{path}"),
    }
}

/// The paths after `prefix::` in `code`, braces expanded: `super::{a, b::{c}}` gives
/// `a`, `b::c`.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    fn group(rest: &str, base: &str, out: &mut Vec<String>) -> usize {
        // `rest` starts just after a `{`; returns the bytes consumed up to its `}`.
        let (mut depth, mut item, mut i) = (0usize, String::new(), 0);
        let bytes = rest.as_bytes();
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    i += 1 + group(
                        &rest[i + 1..],
                        &join(base, item.trim().trim_end_matches("::")),
                        out,
                    );
                    item.clear();
                    continue;
                }
                b'}' if depth == 0 => {
                    if !item.trim().is_empty() {
                        out.push(join(base, item.trim()));
                    }
                    return i + 1;
                }
                b',' => {
                    if !item.trim().is_empty() {
                        out.push(join(base, item.trim()));
                    }
                    item.clear();
                }
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                c => item.push(c as char),
            }
            i += 1;
        }
        i
    }
    let mut out = Vec::new();
    let needle = format!("{prefix}::");
    let mut at = 0;
    while let Some(found) = code[at..].find(&needle) {
        let start = at + found + needle.len();
        let before = code[..at + found].chars().last();
        at = start;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::` or `super_x::`
        }
        let rest = &code[start..];
        if let Some(inner) = rest.strip_prefix('{') {
            group(inner, "", &mut out);
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let path = path.trim_end_matches(':');
        if let Some(inner) = rest[path.len()..].strip_prefix("::{") {
            group(inner, path, &mut out);
        } else {
            out.push(path.to_owned());
        }
    }
    out
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let segments: Vec<&str> = path.split("::").map(str::trim).collect();
    (0..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|m| modules.contains(m))
}

/// Module → the modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    // The binary is another crate; test modules are not what ships.
    all.retain(|f| {
        f.file_name()
            .is_some_and(|n| n != "main.rs" && n != "tests.rs")
    });
    all.retain(|f| !f.components().any(|c| c.as_os_str() == "tests"));
    let modules: BTreeSet<String> = all.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &all {
        let module = module_of(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        // An inline `#[cfg(test)]` module ends the file here, by this crate's convention.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        // `super` of a file module is its parent; of a mod.rs, the directory's parent.
        let sup = parent(&module);
        let named = paths_after(&code, "crate").into_iter().chain(
            paths_after(&code, "super")
                .into_iter()
                .map(|p| join(&sup, &p)),
        );
        for path in named {
            if let Some(target) = resolve(&path, &modules) {
                if target != module {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    edges
}

/// The child of `level` that `module` lies in (`None` when it is not below `level`).
fn child_of(level: &str, module: &str) -> Option<String> {
    let rest = if level.is_empty() {
        module
    } else {
        module.strip_prefix(level)?.strip_prefix("::")?
    };
    let first = rest.split("::").next().filter(|s| !s.is_empty())?;
    Some(join(level, first))
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        stack.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn modules_side_by_side_import_each_other_without_a_cycle() {
    let graph = graph();
    let levels: BTreeSet<String> = graph
        .keys()
        .flat_map(|m| {
            let mut levels = vec![String::new()];
            let mut at = String::new();
            for segment in m.split("::") {
                at = join(&at, segment);
                levels.push(at.clone());
            }
            levels
        })
        .collect();
    let mut cycles = Vec::new();
    for level in &levels {
        let mut siblings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, targets) in &graph {
            let Some(a) = child_of(level, from) else {
                continue;
            };
            for to in targets {
                if let Some(b) = child_of(level, to) {
                    if a != b {
                        siblings.entry(a.clone()).or_default().insert(b);
                    }
                }
            }
        }
        if let Some(cycle) = find_cycle(&siblings) {
            cycles.push(cycle.join(" -> "));
        }
    }
    assert!(
        cycles.is_empty(),
        "import circles:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn the_scan_reads_grouped_and_qualified_paths() {
    let code = "use super::{Health, kube::{Watched, follow}};\nlet x = crate::backend::snippet(y);\nuse crate::{a::B, c};";
    assert_eq!(
        paths_after(code, "super"),
        ["Health", "kube::Watched", "kube::follow"]
    );
    assert_eq!(
        paths_after(code, "crate"),
        ["backend::snippet", "a::B", "c"]
    );
}
