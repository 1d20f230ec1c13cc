//! Every table in README.md and docs/ renders as one (issue 44, item 6): a run of table rows
//! starts with a header and its delimiter row, after a blank line, and ends at a blank line.
//! A paragraph between two rows once cut a table in two, and its second half rendered as
//! text with pipes.

use crate::common;

use common::docs::pages;

/// Problems with the tables of one page's markdown, outside code blocks.
fn table_problems(page: &str, text: &str) -> Vec<String> {
    let delimiter = |line: &str| {
        line.starts_with('|')
            && line.contains("---")
            && line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
    };
    let mut problems = Vec::new();
    let mut fenced = false;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('|') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].starts_with('|') {
            i += 1;
        }
        let at = start + 1;
        if start > 0 && !lines[start - 1].trim().is_empty() {
            problems.push(format!(
                "{page}:{at}: a table row right after text (no blank line)"
            ));
        }
        if !lines
            .get(start + 1)
            .is_some_and(|l| delimiter(l.trim_end()))
        {
            problems.push(format!(
                "{page}:{at}: table rows without a header and delimiter row: {line:?}"
            ));
        }
        if lines.get(i).is_some_and(|l| !l.trim().is_empty()) {
            problems.push(format!(
                "{page}:{}: text right after a table (GFM makes it a row)",
                i + 1
            ));
        }
    }
    problems
}

#[test]
fn every_table_has_its_header_and_stands_alone() {
    let problems: Vec<String> = pages()
        .iter()
        .flat_map(|(page, text)| table_problems(page, text))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_cut_table_is_found() {
    let cut = "Intro.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nA paragraph.\n| 3 | 4 |\n";
    let problems = table_problems("cut.md", cut);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("cut.md:8"), "{problems:?}");
    let whole = "Intro.\n\n| a | b |\n|:---|---:|\n| 1 | 2 |\n\nAfter.\n";
    assert!(table_problems("whole.md", whole).is_empty());
}
