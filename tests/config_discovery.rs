//! `[kubernetes]` and `[[discovery]]` are checked by `inferprobe check` without a cluster:
//! each mistake names its key, and a block's template is held to every rule a target is.

use inferprobe::config::{ConfigError, Port, Source, load_str};

const STATIC: &str = "[[targets]]\nname = \"static\"\nurl = \"http://h\"\nmodel = \"m\"\n";

fn block(lines: &str) -> String {
    format!("{STATIC}[[discovery]]\nname = \"vllm\"\n{lines}\n")
}

fn error(toml: &str) -> ConfigError {
    load_str(toml).expect_err(toml)
}

#[test]
fn every_source_reads_its_own_keys() {
    // SAFETY: only this test reads this variable.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_A", "gpu-node-3") };
    let config = load_str(&format!(
        "[kubernetes]\nnode_name_env = \"INFERPROBE_TEST_NODE_A\"\n{}",
        block(
            "source = \"pods\"\nnamespace = \"inference\"\nselector = \"app=vllm,tier in (gpu, big)\"\n\
             port = \"http\"\nnode_local = true\nmodel_label = \"model\"\npod_labels = [\"app.kubernetes.io/version\"]\n\
             [discovery.template]\nbackend = \"openai\"\nrate = 0.5\n"
        )
    ))
    .unwrap();
    let b = &config.discovery[0];
    assert_eq!(
        b.source,
        Source::Pods {
            namespace: Some("inference".into()),
            selector: "app=vllm,tier in (gpu, big)".into(),
            port: Port::Name("http".into()),
            node: Some("gpu-node-3".into()),
        }
    );
    assert_eq!(
        b.pod_labels,
        [(
            "app.kubernetes.io/version".to_owned(),
            "app_kubernetes_io_version".to_owned()
        )]
    );
    assert_eq!(b.max_targets, 100);

    let pool = load_str(&block(
        "source = \"inferencepool\"\nnamespace = \"ns\"\npool = \"llama\"\npool_version = \"v1alpha2\"\n\
         gateway = \"http://gw.ns.svc:80\"\n",
    ))
    .unwrap();
    assert!(matches!(
        &pool.discovery[0].source,
        Source::InferencePool { pool, gateway: Some(_), .. } if pool == "llama"
    ));
    let file = load_str(&block("source = \"file\"\npath = \"/etc/sd.json\"\n")).unwrap();
    assert!(!file.discovery[0].source.is_kubernetes());
}

#[test]
fn mistakes_name_their_key() {
    let cases = [
        ("source = \"nodes\"", "discovery[0].source", "not pods"),
        (
            "source = \"pods\"\nport = 8000",
            "discovery[0].selector",
            "is required",
        ),
        (
            "source = \"pods\"\nselector = \"app=\"\nport = 8000",
            "",
            "",
        ),
        (
            "source = \"pods\"\nselector = \"a b\"\nport = 8000",
            "discovery[0].selector",
            "not a label selector",
        ),
        (
            "source = \"pods\"\nselector = \"app=x\"",
            "discovery[0].port",
            "is required",
        ),
        (
            "source = \"pods\"\nselector = \"app=x\"\nport = \"HTTP_PORT\"",
            "discovery[0].port",
            "not a port name",
        ),
        (
            "source = \"pods\"\nselector = \"app=x\"\nport = 70000",
            "discovery[0].port",
            "not a port number",
        ),
        (
            "source = \"pods\"\nselector = \"app=x\"\nport = 8000\nservice = \"s\"",
            "discovery[0].service",
            "does not apply",
        ),
        (
            "source = \"endpointslices\"\nservice = \"s\"",
            "discovery[0].namespace",
            "is required",
        ),
        (
            "source = \"file\"\npath = \"/x\"\nmodel_label = \"m\"",
            "discovery[0].model_label",
            "reads pods",
        ),
        (
            "source = \"inferencepool\"\nnamespace = \"n\"\npool = \"p\"\npool_version = \"v2\"",
            "discovery[0].pool_version",
            "v1 or v1alpha2",
        ),
        (
            "source = \"inferencepool\"\nnamespace = \"n\"\npool = \"p\"\ngateway = \"gw:80\"",
            "discovery[0].gateway",
            "not an http(s) URL",
        ),
        (
            "source = \"file\"\npath = \"/x\"\n[discovery.template]\nurl = \"http://h\"",
            "discovery[0].template.url",
            "comes from discovery",
        ),
        (
            "source = \"file\"\npath = \"/x\"\n[discovery.template]\nrate = 0",
            "discovery[0].template.rate",
            "must be > 0",
        ),
        (
            "source = \"file\"\npath = \"/x\"\n[discovery.template]\nlabels = { slo = \"x\" }",
            "discovery[0].template.labels.slo",
            "sets itself",
        ),
        (
            "source = \"pods\"\nselector = \"a=b\"\nport = 1\nnode_local = true",
            "discovery[0].node_local",
            "INFERPROBE_TEST_UNSET_NODE",
        ),
        (
            "source = \"pods\"\nselector = \"a=b\"\nport = 1\npod_labels = [\"9lives\"]",
            "",
            "",
        ),
        (
            "source = \"file\"\npath = \"/x\"\n[discovery.template]\nfleet_rate = 1",
            "discovery[0].template.fleet_rate",
            "fleet_selector",
        ),
    ];
    for (lines, key, reason) in cases {
        let toml = format!(
            "[kubernetes]\nnode_name_env = \"INFERPROBE_TEST_UNSET_NODE\"\n{}",
            block(lines)
        );
        if key.is_empty() {
            load_str(&toml).unwrap_or_else(|e| panic!("{lines}: {e}"));
            continue;
        }
        let err = error(&toml);
        assert_eq!(err.key, key, "{lines}: {err}");
        assert!(err.reason.contains(reason), "{lines}: {err}");
    }
}

#[test]
fn names_are_unique_across_targets_and_blocks() {
    let err = error(&format!(
        "{STATIC}[[discovery]]\nname = \"static\"\nsource = \"file\"\npath = \"/x\"\n"
    ));
    assert_eq!(err.key, "discovery[0].name");
    let twice = "[[discovery]]\nname = \"d\"\nsource = \"file\"\npath = \"/x\"\n";
    let err = error(&format!("{STATIC}{twice}{twice}"));
    assert_eq!(err.key, "discovery[1].name");
}

#[test]
fn fleet_rate_is_divided_among_the_fleet_it_names() {
    let fleet = "[kubernetes]\nfleet_selector = \"app.kubernetes.io/name=inferprobe\"\nfleet_namespace = \"monitoring\"\n";
    let target = "[[targets]]\nname = \"gw\"\nurl = \"http://gw\"\nmodel = \"m\"\nfleet_rate = 2\n";
    let config = load_str(&format!("{fleet}{target}")).unwrap();
    let t = &config.targets[0];
    assert_eq!((t.fleet_rate, t.rate), (Some(2.0), 2.0));
    let fleet_settings = config.kubernetes.fleet.as_ref().unwrap();
    assert_eq!(fleet_settings.namespace, "monitoring");

    let err = error(target);
    assert_eq!(err.key, "targets[0].fleet_rate");
    assert!(err.reason.contains("fleet_selector"), "{err}");
    let err = error(&format!("{fleet}{target}rate = 1\n"));
    assert_eq!(err.key, "targets[0].fleet_rate");
    assert!(err.reason.contains("not both"), "{err}");
    let err = error(&format!(
        "[kubernetes]\nfleet_selector = \"=x\"\nfleet_namespace = \"m\"\n{target}"
    ));
    assert_eq!(err.key, "kubernetes.fleet_selector");
}
