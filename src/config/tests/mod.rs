// figment::Jail closures return figment::Result; its error type is large by design.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use figment::Jail;

use super::*;

mod checks;
mod groups;
mod secrets;

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
            ..Overrides::default()
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
        assert_eq!(err.reason, "unknown key `raet`: did you mean `rate`?");
        assert!(err.source.unwrap().contains("INFERPROBE_DEFAULTS__RAET"));
        Ok(())
    });
}

#[test]
fn unknown_file_key_is_an_error_naming_the_key_and_file() {
    let err = error_for(&format!("{MINIMAL}rat = 2\n"));
    assert_eq!(err.key, "targets[0].rat");
    assert_eq!(err.reason, "unknown key `rat`: did you mean `rate`?");
    assert!(err.source.unwrap().contains("config.toml"));
    // Nothing close: where the keys are, not all ~65 of them.
    let err = error_for(&format!("{MINIMAL}zzzzzz = 2\n"));
    assert_eq!(
        err.reason,
        "unknown key `zzzzzz` (docs/configuration.md lists the keys)"
    );
    // A nested table's index is spelled as the docs spell it.
    let err = error_for(&format!(
        "{MINIMAL}prefix_cache = {{ intervall = \"1m\" }}\n"
    ));
    assert_eq!(err.key, "targets[0].prefix_cache.intervall");
    assert!(err.reason.contains("did you mean `interval`?"), "{err}");
}

#[test]
fn wrong_type_names_the_key() {
    let err = error_for(&MINIMAL.replace("model = \"m\"", "model = \"m\"\nrate = \"fast\""));
    assert_eq!(err.key, "targets[0].rate");
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
