//! The README's deploy steps work as written (issue 33, item 5): the image it pushes is the
//! image the rendered DaemonSet runs, the namespace exists before the Secret is created in
//! it, and the Secret's name and key are the volume and the file the shipped configuration
//! reads. The base is rendered by `kubectl kustomize`, as `kubectl apply -k` renders it
//! (.ci/run installs Debian's kubectl where there is none).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The command lines of the first ```sh block after `heading` in `file`.
fn steps(file: &str, heading: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let section = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("{file}: {heading}"))..];
    let block = section.split("```sh\n").nth(1).unwrap();
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

fn word_after<'a>(line: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = line.split_whitespace();
    words.find(|w| *w == flag)?;
    words.next()
}

/// The objects `kubectl kustomize config/kubernetes` renders, or `None` (skipped) where a
/// developer has no kubectl.
fn render() -> Option<Vec<Value>> {
    let out = match Command::new("kubectl")
        .args(["kustomize", "config/kubernetes"])
        .current_dir(root())
        .output()
    {
        Ok(out) => out,
        Err(e) if std::env::var_os("INFERPROBE_REQUIRE_KUBECTL").is_none() => {
            eprintln!("SKIPPED: kubectl not runnable ({e}); .ci/run installs it");
            return None;
        }
        Err(e) => panic!("kubectl: {e}"),
    };
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.split("\n---\n")
            .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
            .collect(),
    )
}

fn object<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

/// The index of the first step containing `what`.
fn at(steps: &[String], what: &str) -> usize {
    steps
        .iter()
        .position(|s| s.contains(what))
        .unwrap_or_else(|| panic!("no step `{what}` in {steps:#?}"))
}

/// The image the README's first deploy step builds for both architectures the chart's
/// default `architectures` selects, and pushes.
fn pushed_image() -> String {
    let steps = steps("README.md", "## Deploying it");
    let push = &steps[at(&steps, "--push")];
    assert!(
        push.contains("docker buildx build --platform linux/amd64,linux/arm64"),
        "{push}"
    );
    word_after(push, "-t").unwrap().to_owned()
}

/// The Secret the README's steps create, as (namespace, name, key), after asserting the
/// order: the namespace first, then the Secret in it, then `then` (the step that starts the
/// pods that read it).
fn secret_step<'a>(steps: &'a [String], then: &str) -> (&'a str, &'a str, &'a str) {
    let secret = &steps[at(steps, "create secret generic")];
    let namespace = word_after(secret, "-n").unwrap();
    let name = word_after(secret, "generic").unwrap();
    let key = secret
        .split("--from-file=")
        .nth(1)
        .and_then(|f| f.split('=').next())
        .unwrap();
    let (ns_step, secret_step, then) = (
        at(steps, "create namespace"),
        at(steps, "create secret generic"),
        at(steps, then),
    );
    assert!(ns_step < secret_step && secret_step < then, "{steps:#?}");
    // The namespace step makes the namespace the Secret goes in.
    assert_eq!(word_after(&steps[ns_step], "namespace"), Some(namespace));
    (namespace, name, key)
}

/// Where the rendered DaemonSet's container finds the Secret's `key`, after asserting what
/// both ways of deploying hold to: no Namespace object (the namespace is the user's: never
/// created, relabelled or deleted), the DaemonSet in `namespace`, running the pushed image.
fn key_file(objects: &[Value], namespace: &str, image: &str, name: &str, key: &str) -> String {
    assert!(objects.iter().all(|o| o["kind"] != "Namespace"));
    let daemonset = object(objects, "DaemonSet");
    assert_eq!(daemonset["metadata"]["namespace"], namespace);
    let pod = &daemonset["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"], image,
        "the pods run what the README pushes"
    );
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == name)
        .unwrap_or_else(|| panic!("no volume of Secret {name}"));
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap();
    format!("{}/{key}", mount["mountPath"].as_str().unwrap())
}

#[test]
fn the_readme_kustomize_steps_match_what_the_base_renders() {
    let steps = steps("README.md", "### With Kustomize");
    let at = |what: &str| at(&steps, what);
    let image = pushed_image();
    let (namespace, name, key) = secret_step(&steps, "apply -k config/kubernetes");

    let Some(objects) = render() else { return };
    let key_file = key_file(&objects, namespace, &image, name, key);
    // The configuration the pods get (the generated ConfigMap) reads that file.
    let config = objects
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("inferprobe-config-"))
        })
        .unwrap();
    let toml = config["data"]["config.toml"].as_str().unwrap();
    assert!(
        toml.contains(&format!("api_key_file = \"{key_file}\"")),
        "the shipped config reads {key_file}"
    );
    // The README's check step passes on it, secrets absent.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let check = &steps[at("inferprobe check")];
    assert!(check.contains("--no-secrets"), "{check}");
    let run = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_inferprobe"));
        for word in check.split_whitespace() {
            if let Some((var, value)) = word.split_once('=').filter(|_| !word.starts_with('-')) {
                command.env(var, value);
            }
        }
        command.args(args).arg(Path::new(&path)).output().unwrap()
    };
    let out = run(&["check", "--no-secrets", "--config"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without --no-secrets it names the key file it could not read: the Secret matters.
    let out = run(&["check", "--config"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&key_file));
}

/// docs/deploying.md and config/kubernetes/README.md create the Secret in a namespace that
/// exists by then.
#[test]
fn every_deploy_page_makes_the_namespace_before_the_secret() {
    for (file, heading) in [
        ("README.md", "## Deploying it"),
        ("docs/deploying.md", "`config/kubernetes/`"),
        ("config/kubernetes/README.md", "Create the Secret"),
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let ns = text.find("create namespace");
        let secret = text.find("create secret generic");
        assert!(
            ns.is_some() && ns < secret,
            "{file} ({heading}): the namespace comes first"
        );
    }
}

/// Helm 4 as `scripts/install-helm.sh` leaves it, or `None` (skipped) on a developer
/// machine without it; .ci/run installs it and sets INFERPROBE_REQUIRE_HELM.
fn helm() -> Option<PathBuf> {
    let helm = root().join("target/helm/helm");
    if helm.is_file() {
        return Some(helm);
    }
    assert!(
        std::env::var_os("INFERPROBE_REQUIRE_HELM").is_none(),
        "no {}: run bash scripts/install-helm.sh",
        helm.display()
    );
    eprintln!("SKIPPED: no target/helm/helm (bash scripts/install-helm.sh)");
    None
}

/// The README leads with `helm install` (issue 49, item 1): rendered as written, the chart
/// runs the image the README pushes, in the namespace created first, with the Secret the
/// README creates mounted where the configuration reads its key, and carries the `release`
/// label a default kube-prometheus-stack selects the PodMonitor and rules by.
#[test]
fn the_readme_helm_steps_match_what_the_chart_renders() {
    let steps = steps("README.md", "## Deploying it");
    let at = |what: &str| at(&steps, what);
    let image = pushed_image();
    let (namespace, name, key) = secret_step(&steps, "helm install");
    let install = at("helm install");
    // The configuration installed is the one the README edits and checks.
    let config_file = "config/kubernetes/inferprobe.toml";
    let check = &steps[at("inferprobe check")];
    assert!(
        check.ends_with(&format!("--config {config_file}")),
        "{check}"
    );

    let words: Vec<&str> = steps[install].split_whitespace().collect();
    assert_eq!(&words[..2], ["helm", "install"]);
    let (release, chart) = (words[2], words[3]);
    assert_eq!(word_after(&steps[install], "-n"), Some(namespace));
    let mut args: Vec<String> = vec![
        "template".into(),
        release.into(),
        chart.into(),
        "-n".into(),
        namespace.into(),
    ];
    let mut sets = std::collections::BTreeMap::new();
    for pair in words.windows(2) {
        match pair[0] {
            "--set" => {
                let (k, v) = pair[1].split_once('=').unwrap();
                sets.insert(k.to_owned(), v.to_owned());
                args.extend(["--set".into(), pair[1].into()]);
            }
            "--set-file" => {
                let (k, file) = pair[1].split_once('=').unwrap();
                assert_eq!((k, file), ("config", config_file));
                args.extend(["--set-file".into(), pair[1].into()]);
            }
            _ => {}
        }
    }
    let Some(helm) = helm() else { return };
    let out = Command::new(helm)
        .args(&args)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let objects: Vec<Value> = text
        .split("\n---\n")
        .map(|doc| doc.trim_start_matches("---\n"))
        .filter(|doc| doc.lines().any(|l| l.starts_with("kind:")))
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .collect();
    let key_file = key_file(&objects, namespace, &image, name, key);
    let config = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["data"]["config.toml"].is_string())
        .unwrap();
    assert!(
        config["data"]["config.toml"]
            .as_str()
            .unwrap()
            .contains(&format!("api_key_file = \"{key_file}\"")),
        "the installed config reads {key_file}"
    );
    // kube-prometheus-stack's Prometheus selects both by its release's name.
    let release_label = &sets["monitoring.release"];
    for kind in ["PodMonitor", "PrometheusRule"] {
        assert_eq!(
            object(&objects, kind)["metadata"]["labels"]["release"],
            release_label.as_str(),
            "{kind}"
        );
    }
    // Every alert carries the probe's namespace, so an AlertmanagerConfig there routes it.
    let rules = object(&objects, "PrometheusRule");
    let alerts: Vec<&Value> = rules["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter(|r| r["alert"].is_string())
        .collect();
    assert!(alerts.len() >= 17);
    for alert in alerts {
        assert_eq!(
            alert["labels"]["namespace"], namespace,
            "{}",
            alert["alert"]
        );
    }
}
