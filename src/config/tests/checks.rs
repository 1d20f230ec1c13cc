//! Values `load` refuses or corrects, each error naming its key: bad values, URLs,
//! structure, timeouts, operations settings, and the files a config names.

use std::time::Duration;

use figment::Jail;

use super::*;

#[test]
fn invalid_values_name_their_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("rate = 0", "targets[0].rate", "must be > 0"),
        ("rate = -1", "targets[0].rate", "must be > 0"),
        ("burstiness = 0", "targets[0].burstiness", "must be > 0"),
        // Found fuzzing the config loader (tests/fuzz_drivers): these validated, then
        // every probe panicked adding the timeout to its start instant.
        (
            "request_timeout = 1e19",
            "targets[0].request_timeout",
            "longer than 1day",
        ),
        (
            "ttft_timeout = \"500000000000years\"",
            "targets[0].ttft_timeout",
            "longer than 1day",
        ),
        // Found fuzzing the config loader: these validated, then the scheduler panicked on
        // the mean gap (rates) or could not build its gamma distribution (burstiness).
        ("rate = 1e-300", "targets[0].rate", "below the lowest rate"),
        ("rate = 5e-324", "targets[0].rate", "below the lowest rate"),
        (
            "burstiness = 1e-310",
            "targets[0].burstiness",
            "between 0.001 and 1000",
        ),
        (
            "burstiness = 1e306",
            "targets[0].burstiness",
            "between 0.001 and 1000",
        ),
        (
            "max_concurrency = 0",
            "targets[0].max_concurrency",
            "between 1",
        ),
        ("output_tokens = 0", "targets[0].output_tokens", "between 1"),
        (
            "backend = \"grpc\"",
            "targets[0].backend",
            "unknown backend `grpc`",
        ),
        (
            "ttft_timeout = \"0s\"",
            "targets[0].ttft_timeout",
            "greater than zero",
        ),
        (
            "ttft_timeout = \"soon\"",
            "targets[0].ttft_timeout",
            "not a duration",
        ),
        (
            "ttft_timeout = \"3m\"\nrequest_timeout = \"1m\"",
            "targets[0].ttft_timeout",
            "must not exceed request_timeout",
        ),
        (
            "connect_timeout = \"40s\"\nttft_timeout = \"30s\"",
            "targets[0].connect_timeout",
            "must not exceed ttft_timeout",
        ),
        (
            "stall_timeout = \"5m\"\nrequest_timeout = \"1m\"",
            "targets[0].stall_timeout",
            "must not exceed request_timeout",
        ),
        ("top_p = 1.5", "targets[0].top_p", "out of range"),
        (
            "endpoint = \"v1/chat\"",
            "targets[0].endpoint",
            "must start with /",
        ),
        (
            "labels = { target = \"x\" }",
            "targets[0].labels.target",
            "inferprobe sets itself",
        ),
        (
            "labels = { \"bad-name\" = \"x\" }",
            "targets[0].labels.bad-name",
            "not a valid Prometheus label",
        ),
        (
            "headers = { \"x-request-id\" = \"1\" }",
            "targets[0].headers.x-request-id",
            "set by inferprobe",
        ),
        (
            "headers = { \"bad header\" = \"1\" }",
            "targets[0].headers.bad header",
            "not a valid HTTP header name",
        ),
        (
            "extra_body = { stream = false }",
            "targets[0].extra_body.stream",
            "always streams",
        ),
        (
            "continuous_usage_stats = true\ninclude_usage = false",
            "targets[0].continuous_usage_stats",
            "requires include_usage",
        ),
        (
            "request_id_prefix = \"a b\"",
            "targets[0].request_id_prefix",
            "at most 64",
        ),
        // The adapter check (docs/adapters.md).
        (
            "backend = \"anthropic\"\nadapters = {}",
            "targets[0].adapters",
            "needs openai or openai-chat",
        ),
        (
            "adapters = { server = \"sglang\" }",
            "targets[0].adapters.server",
            "unknown server",
        ),
        (
            "adapters = { names = [\"a\", \"a\"] }",
            "targets[0].adapters.names",
            "twice",
        ),
        (
            "adapters = { names = [\"\"] }",
            "targets[0].adapters.names[0]",
            "1 to 256",
        ),
        (
            "adapters = { discover = false }",
            "targets[0].adapters",
            "no adapter to check",
        ),
        (
            "adapters = { per_round = 0 }",
            "targets[0].adapters.per_round",
            "between 1",
        ),
        (
            "adapters = { margin = -1.0 }",
            "targets[0].adapters.margin",
            "positive",
        ),
        (
            "adapters = { interval = \"1ms\" }",
            "targets[0].adapters.interval",
            "between 10ms",
        ),
        (
            "adapters = { golden = \"/nonexistent/golden.json\" }",
            "targets[0].adapters.golden",
            "cannot read",
        ),
    ];
    for (line, key, reason) in cases {
        let err = error_for(&format!("{MINIMAL}{line}\n"));
        assert_eq!(err.key, *key, "for `{line}`: {err}");
        assert!(err.reason.contains(reason), "for `{line}`: {err}");
    }
}

#[test]
fn urls_are_checked() {
    let cases = [
        ("ftp://host", "http:// or https://"),
        ("not a url", "is not a URL"),
        ("http://user:pw@host:8000", "must not contain credentials"),
        ("http://host:8000/?x=1", "without query"),
    ];
    for (url, reason) in cases {
        let toml = MINIMAL.replace("http://127.0.0.1:8000", url);
        let err = error_for(&toml);
        assert_eq!(err.key, "targets[0].url", "{url}");
        assert!(err.reason.contains(reason), "{url}: {err}");
    }
}

#[test]
fn structure_errors() {
    let err = error_for("listen = \"0.0.0.0:9464\"\n");
    assert_eq!(err.key, "targets");
    let err = error_for(&format!("{MINIMAL}{MINIMAL}"));
    assert_eq!(err.key, "targets[1].name");
    assert!(err.reason.contains("duplicate"));
    let err = error_for(&format!("listen = \"nowhere\"\n{MINIMAL}"));
    assert_eq!(err.key, "listen");
    let err = error_for(&format!("[defaults]\nname = \"x\"\n{MINIMAL}"));
    assert_eq!(err.key, "defaults.name");
    let err = error_for("[[targets]]\nname = \"a\"\nurl = \"http://h\"\n");
    assert_eq!(err.key, "targets[0].model");
}

#[test]
fn unset_timeouts_clamp_to_the_ones_that_are_set() {
    let t = |extra: &str| {
        let mut result = None;
        Jail::expect_with(|jail| {
            jail.create_file("config.toml", &format!("{MINIMAL}{extra}\n"))?;
            result = Some(load_in(jail).unwrap().targets[0].timeouts);
            Ok(())
        });
        result.unwrap()
    };
    let secs = Duration::from_secs;
    let short_ttft = t("ttft_timeout = \"2s\"");
    assert_eq!((short_ttft.connect, short_ttft.ttft), (secs(2), secs(2)));
    assert_eq!(short_ttft.request, secs(120));
    let short_total = t("request_timeout = \"10s\"");
    assert_eq!((short_total.ttft, short_total.stall), (secs(10), secs(10)));
    let long_ttft = t("ttft_timeout = \"10m\"");
    assert_eq!(long_ttft.request, secs(600));
    let long_connect = t("connect_timeout = \"45s\"");
    assert_eq!(
        (long_connect.ttft, long_connect.request),
        (secs(45), secs(120))
    );
}

#[test]
fn operations_settings_are_checked() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "slo = { ttft = \"0s\" }",
            "targets[0].slo.ttft",
            "greater than zero",
        ),
        (
            "slo = { objective = 1.0 }",
            "targets[0].slo.objective",
            "between 0 and 1",
        ),
        (
            "slo = { tpot = \"soon\" }",
            "targets[0].slo.tpot",
            "not a duration",
        ),
        (
            "connection = \"sometimes\"",
            "targets[0].connection",
            "`reuse` or `fresh`",
        ),
        (
            "max_output_tokens_per_hour = 0",
            "targets[0].max_output_tokens_per_hour",
            "between 1",
        ),
        (
            "tls_client_key_file = \"k.pem\"",
            "targets[0].tls_client_cert_file",
            "set both",
        ),
        (
            "backend = \"openai-embeddings\"\nslo = { ttft = \"1s\" }",
            "targets[0].slo",
            "only an e2el",
        ),
    ];
    for (line, key, reason) in cases {
        let err = error_for(&format!("{MINIMAL}{line}\n"));
        assert_eq!(err.key, *key, "for `{line}`: {err}");
        assert!(err.reason.contains(reason), "for `{line}`: {err}");
    }
    let err = error_for(&format!(
        "labels_from_env = {{ node = \"SURELY_UNSET_VAR\" }}\n{MINIMAL}"
    ));
    assert_eq!(err.key, "labels_from_env.node");
    assert!(err.reason.contains("SURELY_UNSET_VAR"));
    let err = error_for(&format!(
        "labels = {{ node = \"a\" }}\nlabels_from_env = {{ node = \"X\" }}\n{MINIMAL}"
    ));
    assert_eq!(err.key, "labels_from_env.node");
    // `pod` always names a replica: the probe's own pod is `probe_pod` (issue 44, item 4).
    let err = error_for(&format!(
        "labels_from_env = {{ pod = \"POD_NAME\" }}\n{MINIMAL}"
    ));
    assert_eq!(err.key, "labels_from_env.pod");
    assert!(err.reason.contains("probe_pod"), "{err}");
    let err = error_for(&format!("labels = {{ namespace = \"x\" }}\n{MINIMAL}"));
    assert_eq!(err.key, "labels.namespace");
}

#[test]
fn files_a_config_names_must_be_regular_and_bounded() {
    Jail::expect_with(|jail| {
        // A device would never end (/dev/zero) or block forever (/dev/stdin).
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_file = \"/dev/zero\"\n"),
        )?;
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "targets[0].api_key_file");
        assert!(err.reason.contains("not a regular file"), "{err}");

        jail.create_file("huge.key", &"k".repeat(100 << 10))?;
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_file = \"huge.key\"\n"),
        )?;
        let err = load_in(jail).unwrap_err();
        assert!(err.reason.contains("larger than"), "{err}");
        assert!(!err.reason.contains("kkkk"), "never the contents: {err}");

        // Kubernetes mounts Secrets through symlinks.
        jail.create_file("real.key", "sk-linked\n")?;
        std::os::unix::fs::symlink(jail.directory().join("real.key"), "linked.key")
            .map_err(|e| e.to_string())?;
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_file = \"linked.key\"\n"),
        )?;
        let config = load_in(jail).map_err(|e| e.to_string())?;
        assert_eq!(
            config.targets[0].api_key.as_ref().map(|k| k.expose()),
            Some("sk-linked")
        );

        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}tls_ca_file = \"/dev/zero\"\n"),
        )?;
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "targets[0].tls_ca_file");
        Ok(())
    });
}
