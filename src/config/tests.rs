// figment::Jail closures return figment::Result; its error type is large by design.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use figment::Jail;

use super::*;

const MINIMAL: &str = r#"
[[targets]]
name = "a"
url = "http://127.0.0.1:8000"
model = "m"
"#;

/// Load `config.toml` inside a jail, with no flag overrides.
fn load_in(jail: &Jail) -> Result<Config, ConfigError> {
    load(
        Some(&jail.directory().join("config.toml")),
        &Overrides::default(),
    )
}

fn error_for(toml: &str) -> ConfigError {
    let mut result = None;
    Jail::expect_with(|jail| {
        jail.create_file("config.toml", toml)?;
        result = Some(load_in(jail).expect_err("config should be rejected"));
        Ok(())
    });
    result.unwrap()
}

#[test]
fn minimal_config_gets_documented_defaults() {
    Jail::expect_with(|jail| {
        jail.create_file("config.toml", MINIMAL)?;
        let config = load_in(jail).unwrap();
        assert_eq!(config.listen.to_string(), "0.0.0.0:9464");
        assert_eq!(config.shutdown_grace, Duration::from_secs(25));
        let t = &config.targets[0];
        assert_eq!(t.backend, BackendKind::OpenAiChat);
        assert_eq!(t.url.as_str(), "http://127.0.0.1:8000/v1/chat/completions");
        assert_eq!(t.rate, 0.1);
        assert_eq!(t.burstiness, 1.0);
        assert_eq!(t.prompts.output_tokens, 64);
        assert!(matches!(
            t.prompts.input,
            crate::prompt::Input::Synthetic {
                input_tokens: 128,
                ..
            }
        ));
        assert_eq!(t.prompts.models, ["m"]);
        assert!(t.ignore_eos && t.include_usage && !t.continuous_usage_stats);
        assert!(t.sampling.is_empty(), "server defaults unless configured");
        assert_eq!(t.timeouts.ttft, Duration::from_secs(30));
        assert_eq!(t.request_id_prefix, "inferprobe-");
        Ok(())
    });
}

#[test]
fn targets_inherit_defaults_and_join_endpoints() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "config.toml",
            r#"
            [labels]
            cluster = "east"
            [defaults]
            url = "http://vllm:8000/prefix/"
            model = "llama"
            rate = 0.5
            temperature = 0.0
            stall_timeout = "2s"
            labels = { tier = "gold" }
            [[targets]]
            name = "completions"
            backend = "openai"
            [[targets]]
            name = "custom"
            endpoint = "/openai/deployments/x/chat/completions?api-version=2024-10-21"
            rate = 2
            stall_timeout = 1.5
            labels = { tier = "silver" }
            "#,
        )?;
        let config = load_in(jail).unwrap();
        let (a, b) = (&config.targets[0], &config.targets[1]);
        assert_eq!(a.url.as_str(), "http://vllm:8000/prefix/v1/completions");
        assert_eq!(
            b.url.as_str(),
            "http://vllm:8000/prefix/openai/deployments/x/chat/completions?api-version=2024-10-21"
        );
        assert_eq!((a.rate, b.rate), (0.5, 2.0));
        assert_eq!(a.timeouts.stall, Duration::from_secs(2));
        assert_eq!(b.timeouts.stall, Duration::from_millis(1500));
        assert_eq!(a.sampling["temperature"], 0.0);
        let labels = |t: &Target| t.labels.clone();
        assert_eq!(
            labels(a),
            vec![
                ("cluster".into(), "east".into()),
                ("tier".into(), "gold".into())
            ]
        );
        assert_eq!(labels(b)[1], ("tier".into(), "silver".into()));
        Ok(())
    });
}

#[test]
fn environment_overrides_file_and_flags_override_environment() {
    Jail::expect_with(|jail| {
        jail.create_file("config.toml", MINIMAL)?;
        jail.set_env("INFERPROBE_LISTEN", "127.0.0.1:9999");
        jail.set_env("INFERPROBE_DEFAULTS__RATE", "2.5");
        jail.set_env("INFERPROBE_DEFAULTS__TTFT_TIMEOUT", "7s");
        jail.set_env("INFERPROBE_CONFIG", "ignored: read by the CLI");
        jail.set_env("INFERPROBE_LOG_FORMAT", "json");
        // Kubernetes service links for a Service named `inferprobe`:
        jail.set_env("INFERPROBE_SERVICE_HOST", "10.0.0.1");
        jail.set_env("INFERPROBE_PORT", "tcp://10.0.0.1:9464");
        let config = load_in(jail).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:9999");
        assert_eq!(config.targets[0].rate, 2.5);
        assert_eq!(config.targets[0].timeouts.ttft, Duration::from_secs(7));

        let flags = Overrides {
            listen: Some("127.0.0.1:7000".into()),
            seed: Some(5),
        };
        let config = load(Some(&jail.directory().join("config.toml")), &flags).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:7000");
        assert_eq!(config.seed, Some(5));
        Ok(())
    });
}

#[test]
fn unknown_environment_key_is_an_error_naming_the_variable() {
    Jail::expect_with(|jail| {
        jail.create_file("config.toml", MINIMAL)?;
        jail.set_env("INFERPROBE_DEFAULTS__RAET", "2");
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "defaults.raet");
        assert!(err.reason.contains("unknown field"), "{err}");
        assert!(err.source.unwrap().contains("INFERPROBE_DEFAULTS__RAET"));
        Ok(())
    });
}

#[test]
fn unknown_file_key_is_an_error_naming_the_key_and_file() {
    let err = error_for(&format!("{MINIMAL}rat = 2\n"));
    assert_eq!(err.key, "targets.0.rat");
    assert!(err.reason.contains("unknown field"), "{err}");
    assert!(err.source.unwrap().contains("config.toml"));
}

#[test]
fn wrong_type_names_the_key() {
    let err = error_for(&MINIMAL.replace("model = \"m\"", "model = \"m\"\nrate = \"fast\""));
    assert_eq!(err.key, "targets.0.rate");
}

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
fn missing_file_is_reported() {
    let err = load(
        Some(Path::new("/nonexistent/inferprobe.toml")),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(err.reason.contains("/nonexistent/inferprobe.toml"));
}

#[test]
fn api_keys_come_from_env_or_file_and_never_print() {
    Jail::expect_with(|jail| {
        jail.create_file("key.txt", "sk-from-file\n")?;
        jail.set_env("PROBE_KEY", "sk-from-env");
        jail.create_file(
            "config.toml",
            &format!(
                "{MINIMAL}api_key_env = \"PROBE_KEY\"\n{}",
                MINIMAL
                    .replace("name = \"a\"", "name = \"b\"")
                    .replace("model = \"m\"", "model = \"m\"\napi_key_file = \"key.txt\"")
            ),
        )?;
        let config = load_in(jail).unwrap();
        let key = |i: usize| {
            config.targets[i]
                .api_key
                .as_ref()
                .unwrap()
                .expose()
                .to_owned()
        };
        assert_eq!(key(0), "sk-from-env");
        assert_eq!(key(1), "sk-from-file", "trailing newline trimmed");
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-from"), "secrets leak through Debug");
        Ok(())
    });
}

#[test]
fn api_key_errors_name_the_source_not_the_value() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_env = \"NOT_SET_ANYWHERE\"\n"),
        )?;
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "targets[0].api_key_env");
        assert!(err.reason.contains("NOT_SET_ANYWHERE"));

        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_file = \"missing.txt\"\n"),
        )?;
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "targets[0].api_key_file");

        jail.set_env("BOTH", "x");
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_env = \"BOTH\"\napi_key_file = \"k\"\n"),
        )?;
        assert!(load_in(jail).unwrap_err().reason.contains("not both"));

        jail.set_env("EMPTY_KEY", " ");
        jail.create_file(
            "config.toml",
            &format!("{MINIMAL}api_key_env = \"EMPTY_KEY\"\n"),
        )?;
        assert!(load_in(jail).unwrap_err().reason.contains("empty"));

        jail.set_env("WITH_KEY", "sk-1");
        jail.create_file(
            "config.toml",
            &format!(
                "{MINIMAL}api_key_env = \"WITH_KEY\"\nheaders = {{ authorization = \"Bearer x\" }}\n"
            ),
        )?;
        let err = load_in(jail).unwrap_err();
        assert_eq!(err.key, "targets[0].headers.authorization");
        Ok(())
    });
}

#[test]
fn display_names_key_reason_and_source() {
    let err = ConfigError {
        key: "targets[0].rate".into(),
        reason: "0 must be > 0".into(),
        source: Some("TOML file config.toml".into()),
    };
    assert_eq!(
        err.to_string(),
        "invalid configuration at `targets[0].rate`: 0 must be > 0 (from TOML file config.toml)"
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
}

#[test]
fn labels_from_env_watch_and_slo_are_applied() {
    Jail::expect_with(|jail| {
        jail.set_env("NODE_NAME", "node-3");
        jail.create_file(
            "config.toml",
            &format!(
                "watch_config = true\nlabels_from_env = {{ node = \"NODE_NAME\" }}\n{MINIMAL}slo = {{ ttft = \"250ms\", e2el = 5 }}\nconnection = \"fresh\"\n"
            ),
        )?;
        let config = load_in(jail).unwrap();
        assert_eq!(config.watch, Some(Duration::from_secs(5)));
        let t = &config.targets[0];
        assert_eq!(t.labels, vec![("node".to_owned(), "node-3".to_owned())]);
        let slo = t.slo.unwrap();
        assert_eq!(
            (slo.ttft, slo.e2el, slo.objective),
            (
                Some(Duration::from_millis(250)),
                Some(Duration::from_secs(5)),
                0.99
            )
        );
        assert_eq!(t.connection, ConnectionMode::Fresh);
        Ok(())
    });
}

#[test]
fn fingerprints_change_with_anything_that_defines_a_target() {
    Jail::expect_with(|jail| {
        let fingerprint = |jail: &mut Jail, extra: &str| {
            jail.create_file("config.toml", &format!("{MINIMAL}{extra}\n"))
                .unwrap();
            load_in(jail).unwrap().targets[0].fingerprint
        };
        jail.set_env("KEY", "one");
        let base = fingerprint(jail, "api_key_env = \"KEY\"");
        assert_eq!(base, fingerprint(jail, "api_key_env = \"KEY\""), "stable");
        jail.set_env("KEY", "two");
        assert_ne!(
            base,
            fingerprint(jail, "api_key_env = \"KEY\""),
            "a rotated key restarts the target"
        );
        assert_ne!(base, fingerprint(jail, "api_key_env = \"KEY\"\nrate = 3"));
        Ok(())
    });
}

#[test]
fn the_config_view_redacts_credentials_but_not_token_counts() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "config.toml",
            &format!(
                "{MINIMAL}headers = {{ \"X-Api-Key\" = \"s3\", \"x-team\" = \"ml\", Cookie = \"c\" }}\nextra_body = {{ max_tokens = 5, auth = {{ refresh_token = \"t\" }} }}\n"
            ),
        )?;
        let view = load_in(jail).unwrap().redacted;
        let t = &view["targets"][0];
        assert_eq!(t["headers"]["X-Api-Key"], "[redacted]");
        assert_eq!(t["headers"]["Cookie"], "[redacted]");
        assert_eq!(t["headers"]["x-team"], "ml");
        assert_eq!(t["extra_body"]["max_tokens"], 5);
        assert_eq!(t["extra_body"]["auth"]["refresh_token"], "[redacted]");
        assert!(t.get("temperature").is_none(), "unset keys are left out");
        Ok(())
    });
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
