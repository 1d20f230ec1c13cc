//! `source = "file"`: a Prometheus `file_sd` file, JSON or YAML, re-read every `refresh`:
//!
//! ```json
//! [{"targets": ["10.0.0.7:8000", "vllm-1.internal:8000"], "labels": {"model": "llama", "zone": "a"}}]
//! ```
//!
//! For people without Kubernetes, or with another discovery tool writing the file. A
//! `model` label names the model (it is the `model` label already); other labels go on
//! the series (names starting `__` are Prometheus's own and dropped). A label inferprobe
//! writes itself (`group`, `result`, …) or sets from the file (`address`) would give a
//! series that name twice and lose the whole scrape: it goes on the series as
//! `exported_<name>`, as Prometheus renames a scraped label that clashes, with one warning
//! per name (`check` refuses it while the file is there to read). A file that is missing or
//! does not parse keeps the last good set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use crate::config::{Found, RESERVED_LABELS};

/// A file_sd file of a few thousand targets is far below this.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

pub async fn run(
    path: PathBuf,
    refresh: Duration,
    scheme: &'static str,
    sets: watch::Sender<Option<Vec<Found>>>,
    mut health: Health,
    stop: CancellationToken,
) {
    let mut last: Option<Vec<u8>> = None;
    let mut warned = BTreeSet::new();
    loop {
        match crate::files::read_file(&path, MAX_FILE_BYTES) {
            Ok(bytes) if last.as_ref() == Some(&bytes) => health.ok(),
            Ok(bytes) => match parse(&path, &bytes, scheme) {
                Ok(parsed) => {
                    for label in parsed.renamed.difference(&warned) {
                        tracing::warn!(
                            file = %path.display(),
                            label = %label,
                            "a file_sd label has a name inferprobe sets itself; it goes on the series as exported_{label}"
                        );
                    }
                    warned.extend(parsed.renamed);
                    health.ok();
                    last = Some(bytes);
                    sets.send_replace(Some(parsed.found));
                }
                Err(e) => health.failed(e),
            },
            Err(e) => health.failed(e),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(refresh) => {}
        }
    }
}

/// A file_sd file read: its endpoints, and the label names it had that clash with one
/// inferprobe sets (renamed `exported_<name>` on the endpoints).
#[derive(Debug)]
pub struct Parsed {
    pub found: Vec<Found>,
    pub renamed: BTreeSet<String>,
}

/// The labels a file_sd endpoint gets from inferprobe rather than from the file.
const FILE_LABELS: [&str; 1] = ["address"];

/// The endpoints of a file_sd file (JSON, or YAML when it does not start with `[`).
pub fn parse(path: &Path, bytes: &[u8], scheme: &str) -> Result<Parsed, String> {
    let name = path.display();
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8"))?;
    let groups: Vec<Group> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("{name}: {e}"))?
    };
    let mut found = BTreeMap::new();
    let mut renamed = BTreeSet::new();
    let clashes = |name: &str| RESERVED_LABELS.contains(&name) || FILE_LABELS.contains(&name);
    for (i, group) in groups.into_iter().enumerate() {
        let mut labels = BTreeMap::new();
        let mut model = None;
        let own: BTreeSet<String> = group.labels.keys().cloned().collect();
        for (label, value) in group.labels {
            if label.starts_with("__") {
                continue;
            }
            if label == "model" {
                model = Some(value);
                continue;
            }
            if !valid_label_name(&label) {
                return Err(format!(
                    "{name}: group {i}: `{label}` is not a valid Prometheus label name"
                ));
            }
            if clashes(&label) {
                let mut exported = format!("exported_{label}");
                while own.contains(&exported) || labels.contains_key(&exported) {
                    exported.insert_str(0, "exported_");
                }
                renamed.insert(label);
                labels.insert(exported, value);
                continue;
            }
            labels.insert(label, value);
        }
        for address in group.targets {
            // host:port, as Prometheus takes it; the scheme is the block's.
            let url = url::Url::parse(&format!("{scheme}://{address}"))
                .ok()
                .filter(|u| u.host().is_some() && u.path() == "/" && u.port().is_some())
                .ok_or_else(|| format!("{name}: group {i}: `{address}` is not host:port"))?;
            let mut labels = labels.clone();
            labels.insert("address".into(), address.clone());
            found.insert(
                address.clone(),
                Found {
                    key: address.clone(),
                    url: url.as_str().trim_end_matches('/').to_owned(),
                    model: model.clone(),
                    labels,
                    origin: format!("{address} in {name}"),
                    revision: None,
                    workload: None,
                    created: None,
                },
            );
        }
    }
    Ok(Parsed {
        found: found.into_values().collect(),
        renamed,
    })
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_file_sd_read_the_same() {
        let json = br#"[{"targets": ["10.0.0.7:8000", "vllm-1:8001"], "labels": {"model": "llama", "zone": "a", "__meta_x": "y"}}]"#;
        let yaml = b"- targets: ['10.0.0.7:8000', 'vllm-1:8001']\n  labels:\n    model: llama\n    zone: a\n    __meta_x: y\n";
        let a = parse(Path::new("sd.json"), json, "http").unwrap().found;
        let b = parse(Path::new("sd.yaml"), yaml, "http").unwrap().found;
        assert_eq!(
            a.iter().map(|f| &f.url).collect::<Vec<_>>(),
            ["http://10.0.0.7:8000", "http://vllm-1:8001"]
        );
        assert_eq!(a[0].model.as_deref(), Some("llama"));
        assert_eq!(a[0].labels["zone"], "a");
        assert_eq!(a[0].labels["address"], "10.0.0.7:8000");
        assert!(!a[0].labels.contains_key("__meta_x") && !a[0].labels.contains_key("model"));
        assert_eq!(
            a.iter().map(|f| (&f.key, &f.labels)).collect::<Vec<_>>(),
            b.iter().map(|f| (&f.key, &f.labels)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn bad_files_name_the_culprit() {
        let cases: [(&[u8], &str); 4] = [
            (
                b"[{\"targets\": [\"no-port\"]}]",
                "`no-port` is not host:port",
            ),
            (
                b"[{\"targets\": [\"h:1\"], \"labels\": {\"a-b\": \"x\"}}]",
                "`a-b` is not a valid Prometheus label name",
            ),
            (b"[{\"targetz\": []}]", "sd.json"),
            (b"\xff", "not UTF-8"),
        ];
        for (bytes, want) in cases {
            let err = parse(Path::new("sd.json"), bytes, "http").unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    /// A label named like one inferprobe writes would duplicate it on every series and lose
    /// the scrape: it is renamed as Prometheus renames a clashing scraped label.
    #[test]
    fn a_clashing_label_is_exported_not_duplicated() {
        let json = br#"[{"targets": ["h:1"], "labels": {"group": "g", "address": "a", "exported_group": "x", "zone": "z"}}]"#;
        let parsed = parse(Path::new("sd.json"), json, "http").unwrap();
        let labels = &parsed.found[0].labels;
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [
                (&"address".to_owned(), &"h:1".to_owned()),
                (&"exported_address".to_owned(), &"a".to_owned()),
                (&"exported_exported_group".to_owned(), &"g".to_owned()),
                (&"exported_group".to_owned(), &"x".to_owned()),
                (&"zone".to_owned(), &"z".to_owned()),
            ]
        );
        assert_eq!(
            parsed
                .renamed
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["address", "group"]
        );
    }
}
