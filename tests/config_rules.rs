//! Configuration rules that keep a probe from measuring the wrong thing or breaking the
//! scrape: URLs as people paste them, `n > 1`, label names the exporter owns, and the name
//! the output limit is sent under. Each is checked at `inferprobe check` time, naming the key.

use inferprobe::config::{ConfigError, load_str};

fn target(lines: &str) -> String {
    format!("[[targets]]\nname = \"t\"\nmodel = \"m\"\n{lines}\n")
}

fn url_of(lines: &str) -> String {
    match load_str(&target(lines)) {
        Ok(config) => config.targets[0].url.to_string(),
        Err(e) => panic!("{lines}: {e}"),
    }
}

fn error(lines: &str) -> ConfigError {
    load_str(&target(lines)).expect_err(lines)
}

#[test]
fn an_openai_sdk_base_url_ending_in_v1_probes_the_right_path() {
    let cases = [
        (
            "openai-chat",
            "http://vllm:8000/v1",
            "http://vllm:8000/v1/chat/completions",
        ),
        (
            "openai-chat",
            "http://vllm:8000/v1/",
            "http://vllm:8000/v1/chat/completions",
        ),
        (
            "openai",
            "http://vllm:8000/v1",
            "http://vllm:8000/v1/completions",
        ),
        (
            "openai-responses",
            "https://gw/team-a/v1",
            "https://gw/team-a/v1/responses",
        ),
        ("anthropic", "http://h:8000/v1", "http://h:8000/v1/messages"),
        ("openai-embeddings", "http://h/v1", "http://h/v1/embeddings"),
        // Unchanged: a base without /v1, and a path that only contains v1.
        (
            "openai-chat",
            "http://vllm:8000",
            "http://vllm:8000/v1/chat/completions",
        ),
        (
            "openai-chat",
            "http://h/v1x",
            "http://h/v1x/v1/chat/completions",
        ),
        // TGI's endpoint does not start with /v1: nothing to merge.
        ("tgi", "http://tgi/v1", "http://tgi/v1/generate_stream"),
    ];
    for (backend, url, want) in cases {
        let got = url_of(&format!("backend = \"{backend}\"\nurl = \"{url}\""));
        assert_eq!(got, want, "{backend} {url}");
    }
}

#[test]
fn a_full_endpoint_url_is_refused_with_what_to_write() {
    let cases = [
        (
            "openai-chat",
            "http://vllm:8000/v1/chat/completions",
            "`http://vllm:8000`",
        ),
        (
            "openai",
            "http://vllm:8000/v1/completions/",
            "`http://vllm:8000`",
        ),
        ("tgi", "http://tgi:80/generate_stream", "`http://tgi`"),
        (
            "tensorrt-llm",
            "http://triton:8000/v2/models/m/generate_stream",
            "`http://triton:8000`",
        ),
    ];
    for (backend, url, advice) in cases {
        let err = error(&format!("backend = \"{backend}\"\nurl = \"{url}\""));
        assert_eq!(err.key, "targets[0].url", "{url}");
        assert!(err.reason.contains("already ends with"), "{url}: {err}");
        assert!(err.reason.contains(advice), "{url}: {err}");
    }
}

#[test]
fn more_than_one_choice_is_refused() {
    for (key, value) in [("n", "2"), ("best_of", "3"), ("n", "\"2\"")] {
        let err = error(&format!(
            "url = \"http://h\"\nextra_body = {{ {key} = {value} }}"
        ));
        assert_eq!(err.key, format!("targets[0].extra_body.{key}"));
        assert!(err.reason.contains("one answer"), "{err}");
    }
    // n = 1 is what a probe does anyway.
    url_of("url = \"http://h\"\nextra_body = { n = 1, best_of = 1 }");
}

#[test]
fn labels_the_exporter_sets_are_reserved() {
    for name in inferprobe::metrics::labels::RESERVED {
        let err = error(&format!(
            "url = \"http://h\"\nlabels = {{ {name} = \"x\" }}"
        ));
        assert_eq!(err.key, format!("targets[0].labels.{name}"));
        assert!(err.reason.contains("sets itself"), "{err}");
    }
    // Exemplar labels are a set of their own: a series label of the same name clashes
    // with nothing.
    for name in ["request_id", "trace_id"] {
        let ok = load_str(&target(&format!(
            "url = \"http://h\"\nlabels = {{ {name} = \"x\" }}"
        )));
        assert!(ok.is_ok(), "{name}");
    }
    let global = format!("[labels]\nslo = \"gold\"\n{}", target("url = \"http://h\""));
    let err = load_str(&global).unwrap_err();
    assert_eq!(err.key, "labels.slo");
}

#[test]
fn the_output_limit_field_is_configurable() {
    let config = load_str(&target(
        "url = \"http://h\"\nmax_tokens_field = \"max_completion_tokens\"",
    ))
    .unwrap();
    assert_eq!(
        config.targets[0].options.max_tokens_field,
        "max_completion_tokens"
    );
    let config = load_str(&target("url = \"http://h\"")).unwrap();
    assert_eq!(config.targets[0].options.max_tokens_field, "max_tokens");
    let err = error("url = \"http://h\"\nmax_tokens_field = \"max_new_tokens\"");
    assert_eq!(err.key, "targets[0].max_tokens_field");
}
