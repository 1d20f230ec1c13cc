//! API keys: from the environment or a file, never printed, errors naming the source
//! and not the value, and the config view redacted.

use figment::Jail;

use super::*;

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
