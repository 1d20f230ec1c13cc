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

#[test]
fn the_readme_deploy_steps_match_what_the_base_renders() {
    let steps = steps("README.md", "## Deploying it");
    let at = |what: &str| {
        steps
            .iter()
            .position(|s| s.contains(what))
            .unwrap_or_else(|| panic!("no step `{what}` in {steps:#?}"))
    };
    let push = &steps[at("docker push")];
    let image = push.rsplit(' ').next().unwrap();
    let secret = &steps[at("create secret generic")];
    let namespace = word_after(secret, "-n").unwrap();
    let name = word_after(secret, "generic").unwrap();
    let key = secret
        .split("--from-file=")
        .nth(1)
        .and_then(|f| f.split('=').next())
        .unwrap();
    // The order: the namespace, then the Secret in it, then the pods that read it.
    let (ns_step, secret_step, apply) = (
        at("create namespace"),
        at("create secret generic"),
        at("apply -k config/kubernetes"),
    );
    assert!(ns_step < secret_step && secret_step < apply, "{steps:#?}");
    // The namespace step makes the namespace the Secret goes in.
    assert_eq!(word_after(&steps[ns_step], "namespace"), Some(namespace));

    let Some(objects) = render() else { return };
    // The namespace is the user's: the base never creates, relabels or deletes one.
    assert!(objects.iter().all(|o| o["kind"] != "Namespace"));
    let daemonset = object(&objects, "DaemonSet");
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
    let key_file = format!("{}/{key}", mount["mountPath"].as_str().unwrap());
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
