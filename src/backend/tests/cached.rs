//! Cached prompt tokens as each API reports them (issue 35, item 1): read where the
//! server says, `None` where it says nothing, and never a failed probe for a malformed
//! detail (the count is informational; the probe's own numbers stand).

use super::*;

fn chat(usage: &str) -> Result<Measurement, ProbeError> {
    let sse = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"ok\"}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
    );
    run(BackendKind::OpenAiChat, &sse, false).0
}

#[test]
fn openai_style_prompt_tokens_details() {
    // vLLM with --enable-prompt-tokens-details: whole 16-token blocks of a 456-token prompt.
    let m = chat(r#"{"prompt_tokens":456,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":384}}"#).unwrap();
    assert_eq!(
        (m.prompt_tokens, m.cached_prompt_tokens),
        (Some(456), Some(384))
    );
    // Reported as nothing cached: a real 0.
    let m = chat(
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}"#,
    )
    .unwrap();
    assert_eq!(m.cached_prompt_tokens, Some(0));
    // Not reported (vLLM without the flag writes null): nothing, not 0.
    for usage in [
        r#"{"prompt_tokens":9,"completion_tokens":1}"#,
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":null}"#,
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{}}"#,
    ] {
        assert_eq!(chat(usage).unwrap().cached_prompt_tokens, None, "{usage}");
    }
    // Malformed: ignored, and the probe still succeeds.
    for usage in [
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":"many"}}"#,
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":-1}}"#,
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":[1]}"#,
    ] {
        assert_eq!(chat(usage).unwrap().cached_prompt_tokens, None, "{usage}");
    }
    // More cached than the prompt is a server's slip: capped at the prompt.
    let m = chat(
        r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":50}}"#,
    )
    .unwrap();
    assert_eq!(m.cached_prompt_tokens, Some(9));
}

#[test]
fn llama_cpp_timings_stand_in_when_usage_says_nothing() {
    let sse = concat!(
        "data: {\"choices\":[{\"text\":\" a\",\"index\":0,\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":30},",
        "\"timings\":{\"cache_n\":24,\"prompt_n\":6,\"prompt_ms\":1.5,\"predicted_n\":1,\"predicted_ms\":0.2,\"predicted_per_token_ms\":0.2}}\n\n",
        "data: [DONE]\n\n",
    );
    let (m, _) = run(BackendKind::OpenAi, sse, false);
    assert_eq!(m.unwrap().cached_prompt_tokens, Some(24));
}

#[test]
fn anthropic_cache_read_and_responses_input_details() {
    let anthropic = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":1000,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (m, info) = run(BackendKind::Anthropic, anthropic, false);
    let m = m.unwrap();
    assert_eq!(
        (m.prompt_tokens, m.cached_prompt_tokens),
        (Some(1010), Some(1000))
    );
    assert_eq!(info.cache_written, Some(0));

    let responses = concat!(
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":2048,\"input_tokens_details\":{\"cached_tokens\":1920},\"output_tokens\":1}}}\n\n",
    );
    let m = run(BackendKind::OpenAiResponses, responses, false)
        .0
        .unwrap();
    assert_eq!(
        (m.prompt_tokens, m.cached_prompt_tokens),
        (Some(2048), Some(1920))
    );
}

#[test]
fn deepseek_reports_its_context_cache_hits_apart() {
    // DeepSeek's usage: the hit and miss counts beside prompt_tokens, no details.
    let m = chat(r#"{"prompt_tokens":1011,"completion_tokens":4,"prompt_cache_hit_tokens":1007,"prompt_cache_miss_tokens":4}"#).unwrap();
    assert_eq!(
        (m.prompt_tokens, m.cached_prompt_tokens),
        (Some(1011), Some(1007))
    );
    let m = chat(r#"{"prompt_tokens":1011,"completion_tokens":4,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1011}"#).unwrap();
    assert_eq!(m.cached_prompt_tokens, Some(0));
    // The OpenAI-style detail wins where both are sent.
    let m = chat(r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":8},"prompt_cache_hit_tokens":3}"#).unwrap();
    assert_eq!(m.cached_prompt_tokens, Some(8));
    // Malformed: nothing, and the probe stands.
    let m =
        chat(r#"{"prompt_tokens":9,"completion_tokens":1,"prompt_cache_hit_tokens":"x"}"#).unwrap();
    assert_eq!(m.cached_prompt_tokens, None);
}
