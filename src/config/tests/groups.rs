//! Issue 31, item 8: a discovery block's canary groups checked against its source.

use super::*;

/// A discovery block of `source` whose template runs a canary with `canary` added.
fn block(source: &str, extra: &str, canary: &str) -> String {
    let kube = match source {
        "file" => r#"path = "pool.json""#,
        "endpointslices" => "namespace = \"inference\"\nservice = \"llm\"\nport = \"http\"",
        _ => "namespace = \"inference\"\nselector = \"app=llm\"\nport = \"http\"",
    };
    format!(
        r#"
[[discovery]]
name = "llm"
source = "{source}"
{kube}
{extra}
[discovery.template]
model = "m"
canary = {{ interval = "60s"{canary} }}
"#
    )
}

fn loaded(toml: &str) -> Result<Config, ConfigError> {
    let mut result = None;
    Jail::expect_with(|jail| {
        jail.create_file("config.toml", toml)?;
        jail.create_file("pool.json", "[]")?;
        result = Some(load_in(jail));
        Ok(())
    });
    result.unwrap()
}

#[test]
fn endpointslices_cannot_tell_versions_apart_so_a_canary_is_refused() {
    let e = loaded(&block("endpointslices", "", "")).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("discovery[0].template.canary"), "{text}");
    assert!(
        text.contains("endpointslices") && text.contains(r#"source = "pods""#),
        "{text}"
    );
}

#[test]
fn group_by_takes_a_pod_label_as_users_spell_it() {
    let extra = r#"pod_labels = ["app.kubernetes.io/version"]"#;
    let canary = r#", group_by = ["app.kubernetes.io/version"]"#;
    let config = loaded(&block("pods", extra, canary)).unwrap();
    let target = config.discovery[0].example().unwrap();
    let spec = target.canary.as_deref().unwrap();
    assert_eq!(spec.group_by, ["app_kubernetes_io_version"]);
    // The example's group is read from the stored label, not "" for every replica.
    let labels = vec![("app_kubernetes_io_version".to_owned(), "v2".to_owned())];
    assert_eq!(spec.group_of(&labels, None).as_deref(), Some("v2"));
}

#[test]
fn group_by_a_label_the_replicas_do_not_have_is_refused() {
    let canary = r#", group_by = ["app.kubernetes.io/version"]"#;
    let text = loaded(&block("pods", "", canary)).unwrap_err().to_string();
    assert!(text.contains("template.canary.group_by"), "{text}");
    assert!(
        text.contains("app.kubernetes.io/version") && text.contains("pod_labels"),
        "{text}"
    );
    // Labels the replicas do have pass: the pod's own, and the template's.
    for ok in [r#", group_by = ["namespace"]"#, r#", group_by = ["node"]"#] {
        assert!(loaded(&block("pods", "", ok)).is_ok(), "{ok}");
    }
    // `pool` is an InferencePool's replicas' label, not a Service's pods'.
    assert!(loaded(&block("pods", "", r#", group_by = ["pool"]"#)).is_err());
    // file_sd labels are the file's: unknown until read, so not refused.
    assert!(loaded(&block("file", "", r#", group_by = ["version"]"#)).is_ok());
}

#[test]
fn check_says_what_the_group_is_for_the_source() {
    let describe = |source: &str| {
        let config = loaded(&block(source, "", "")).unwrap();
        let target = config.discovery[0].example().unwrap();
        let kind = config.discovery[0].source.kind();
        crate::canary::describe(
            target.canary.as_deref().unwrap(),
            target.backend,
            Some(kind),
        )
    };
    assert!(describe("pods").contains("controller revision"));
    assert!(describe("file").contains("one group: file_sd names no version"));
}

/// Labels inferprobe or discovery sets cannot be copied from a pod nor grouped by: the
/// first would give a series a name twice (or say the wrong replica), the second makes
/// one group of everything (issue 33, item 1).
#[test]
fn labels_inferprobe_sets_are_refused_in_pod_labels_and_group_by() {
    for (extra, canary, key, why) in [
        (
            r#"pod_labels = ["group"]"#,
            "",
            "pod_labels.group",
            "inferprobe sets itself",
        ),
        (
            r#"pod_labels = ["result"]"#,
            "",
            "pod_labels.result",
            "inferprobe sets itself",
        ),
        (
            r#"pod_labels = ["pod"]"#,
            "",
            "pod_labels.pod",
            "which replica",
        ),
        (
            r#"pod_labels = ["node"]"#,
            "",
            "pod_labels.node",
            "which replica",
        ),
        (
            "",
            r#", group_by = ["model"]"#,
            "canary.group_by",
            "group \"\"",
        ),
        (
            "",
            r#", group_by = ["result"]"#,
            "canary.group_by",
            "group \"\"",
        ),
    ] {
        let text = loaded(&block("pods", extra, canary))
            .unwrap_err()
            .to_string();
        assert!(
            text.contains(key) && text.contains(why),
            "{extra}{canary}: {text}"
        );
    }
    let text = loaded(&block("file", "", r#", group_by = ["group"]"#))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("group_by") && text.contains("`group`"),
        "{text}"
    );
}
