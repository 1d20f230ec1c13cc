//! The native (non-OpenAI) wire formats of self-hosted servers: TGI, Triton /
//! TensorRT-LLM and DeepSpeed-MII.

use super::*;
use crate::backend::tgi::Tgi;

#[test]
fn tgi_request_translates_sampling_to_what_tgi_accepts() {
    let t = target("tgi", |t| {
        t.temperature = Some(0.0);
        t.top_p = Some(1.0);
        t.top_k = Some(5);
    });
    let body = json_body(Tgi.request(&t, &prompt(7)));
    assert_eq!(body["inputs"], "hello there");
    let parameters = &body["parameters"];
    assert_eq!(parameters["max_new_tokens"], 7);
    assert_eq!(parameters["details"], true);
    assert_eq!(parameters["do_sample"], false, "temperature 0 means greedy");
    assert!(parameters.get("temperature").is_none() && parameters.get("top_p").is_none());
    assert_eq!(parameters["top_k"], 5);
}

#[test]
fn tgi_stream_counts_tokens_and_ends_on_the_final_event() {
    let sse = concat!(
        "data:{\"index\":1,\"token\":{\"id\":1,\"text\":\" a\",\"logprob\":-1,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        ":\n\n",
        "data:{\"index\":2,\"token\":{\"id\":2,\"text\":\" b\",\"logprob\":-1,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        "data:{\"index\":3,\"token\":{\"id\":3,\"text\":\"</s>\",\"logprob\":-1,\"special\":true},\"generated_text\":\" a b\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":3,\"seed\":null,\"input_length\":4}}\n\n",
    );
    let (result, info) = run(BackendKind::Tgi, sse, true);
    let m = result.unwrap();
    assert_eq!(m.ttft, Some(Duration::from_millis(10)));
    assert_eq!(
        m.output_tokens,
        Some(TokenCount::Usage(3)),
        "details.generated_tokens"
    );
    assert_eq!(m.prompt_tokens, Some(4));
    assert_eq!(
        m.itl_observations(),
        1,
        "the special EOS token is not output"
    );
    assert_eq!(info.text, " a b");
    assert_eq!(info.finish_reason.as_deref(), Some("eos_token"));

    let truncated = &sse[..sse.rfind("data:").unwrap()];
    let (result, _) = run(BackendKind::Tgi, truncated, true);
    assert_eq!(
        category(&result),
        ErrorCategory::StreamInterrupted,
        "no final event"
    );
}

#[test]
fn tgi_error_inside_a_200_stream() {
    let sse = "data:{\"error\":\"Model is overloaded\",\"error_type\":\"overloaded\"}\n\n";
    let (result, _) = run(BackendKind::Tgi, sse, true);
    let err = result.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::StreamErrorEvent);
    assert_eq!(
        err.to_string(),
        "error event in a 2xx stream: overloaded: Model is overloaded"
    );
}

#[test]
fn triton_stream_ends_at_eof_and_reports_errors() {
    let t = target("tensorrt-llm", |_| {});
    let body = json_body(trtllm::TensorRtLlm.request(&t, &prompt(9)));
    assert_eq!(
        (body["text_input"].as_str(), body["max_tokens"].as_u64()),
        (Some("hello there"), Some(9))
    );
    assert_eq!(body["min_tokens"], 9, "ignore_eos via min_tokens");
    assert_eq!(body["stream"], true);

    let event = |text: &str| {
        format!(
            "data: {{\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\"{text}\"}}\n\n"
        )
    };
    let sse = [event(" x"), event(" y"), event(" z")].concat();
    let (result, info) = run(BackendKind::TensorRtLlm, &sse, true);
    let m = result.unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Events(3)));
    assert_eq!(info.text, " x y z");
    assert_eq!(info.model.as_deref(), Some("ensemble"));

    let (result, _) = run(
        BackendKind::TensorRtLlm,
        &format!("{}data: {{\"error\":\"boom\"}}\n\n", event(" x")),
        true,
    );
    assert_eq!(category(&result), ErrorCategory::StreamErrorEvent);
    let (result, _) = run(
        BackendKind::TensorRtLlm,
        "data: {\"text_output\":5}\n\n",
        true,
    );
    assert_eq!(category(&result), ErrorCategory::InvalidResponse);
}

#[test]
fn mii_reads_every_response_shape() {
    let t = target("deepspeed-mii", |_| {});
    let parse = |body: &str| {
        let mut info = ResponseInfo::default();
        let whole = mii::DeepSpeedMii.parse_body(body.as_bytes(), &t, &mut info);
        (whole, info)
    };
    let (whole, info) = parse(
        r#"{"model":"m","choices":[{"index":0,"text":" out put","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
    );
    let whole = whole.unwrap();
    assert!(whole.has_output);
    assert_eq!(
        (whole.output_tokens, whole.prompt_tokens),
        (Some(2), Some(3))
    );
    assert_eq!(
        (info.text.as_str(), info.finish_reason.as_deref()),
        (" out put", Some("length"))
    );
    let (whole, info) = parse(r#"{"text":["generated"]}"#);
    assert!(whole.unwrap().has_output && info.text == "generated");
    let (whole, _) = parse(
        r#"[{"generated_text":"g","prompt_length":4,"generated_length":7,"finish_reason":"stop"}]"#,
    );
    assert_eq!(whole.unwrap().output_tokens, Some(7));
    let (whole, _) = parse(r#"{"object":"error","message":"Model x not found.","code":40301}"#);
    assert_eq!(
        whole.unwrap_err().category(),
        ErrorCategory::StreamErrorEvent
    );
    let (whole, _) = parse(r#"{"unexpected":true}"#);
    assert_eq!(
        whole.unwrap_err().category(),
        ErrorCategory::InvalidResponse
    );
    let (whole, _) = parse(r#"{"text":[""]}"#);
    assert!(
        !whole.unwrap().has_output,
        "empty text is an empty response"
    );
}
