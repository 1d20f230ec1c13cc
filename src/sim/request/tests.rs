use super::*;

#[test]
fn routes() {
    assert_eq!(
        Dialect::route(&Method::POST, "/v2/models/ensemble/generate_stream"),
        Some(Dialect::Triton)
    );
    assert_eq!(
        Dialect::route(&Method::POST, "/generate_stream"),
        Some(Dialect::Tgi)
    );
    assert_eq!(Dialect::route(&Method::GET, "/v1/completions"), None);
    assert_eq!(Dialect::route(&Method::POST, "/nope"), None);
}

fn parse(dialect: Dialect, content_type: &str, body: &[u8]) -> Result<SimRequest, String> {
    super::parse(dialect, content_type, body).map(|(request, _)| request)
}

#[test]
fn parses_each_dialect() {
    let tgi = parse(
        Dialect::Tgi,
        "application/json",
        br#"{"inputs":"a b c","parameters":{"max_new_tokens":7,"details":true}}"#,
    )
    .unwrap();
    assert_eq!(
        (
            tgi.prompt_tokens,
            tgi.max_tokens,
            tgi.stream,
            tgi.include_usage
        ),
        (3, 7, true, true)
    );
    let anthropic = parse(Dialect::Anthropic, "", br#"{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x y"}]}"#).unwrap();
    assert_eq!(
        (
            anthropic.prompt_tokens,
            anthropic.max_tokens,
            anthropic.stream
        ),
        (2, 5, true)
    );
    let responses = parse(
        Dialect::Responses,
        "",
        br#"{"model":"r","input":"one","max_output_tokens":9,"stream":true}"#,
    )
    .unwrap();
    assert_eq!((responses.max_tokens, responses.prompt_tokens), (9, 1));
    let triton = parse(
        Dialect::Triton,
        "",
        br#"{"text_input":"q","max_tokens":4,"stream":true}"#,
    )
    .unwrap();
    assert_eq!((triton.max_tokens, triton.stream), (4, true));
    assert!(parse(Dialect::Chat, "", br#"{"model":"x"}"#).is_err());
}

#[test]
fn media_parts_are_returned_for_loading_and_text_is_counted() {
    let chat = br#"{"stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[
        {"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#;
    let (request, media) = super::parse(Dialect::Chat, "", chat).unwrap();
    assert_eq!((request.prompt_tokens, media.len()), (5, 1));
    assert_eq!((request.media_items, request.image_pixels), (0, 0));
    let anthropic = br#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://h/i.png"}}]}]}"#;
    let (_, media) = super::parse(Dialect::Anthropic, "", anthropic).unwrap();
    assert_eq!(media.len(), 1);
    let responses = br#"{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://h/i.png"},{"type":"input_text","text":"hi"}]}]}"#;
    let (request, media) = super::parse(Dialect::Responses, "", responses).unwrap();
    assert_eq!((request.prompt_tokens, media.len()), (1, 1));
    let unknown = br#"{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}"#;
    assert_eq!(
        parse(Dialect::Chat, "", unknown),
        Err("Unsupported content part type: input_audio".into())
    );
}

#[test]
fn parses_a_multipart_transcription_request() {
    let wav = wav::generate(1.5, 440.0);
    let mut body = Vec::new();
    for (name, value) in [
        ("model", &b"whisper"[..]),
        ("stream", b"true"),
        ("stream_include_usage", b"true"),
        ("max_completion_tokens", b"12"),
    ] {
        body.extend_from_slice(
            format!("--XYZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n");
    body.extend_from_slice(&wav);
    body.extend_from_slice(b"\r\n--XYZ--\r\n");
    let req = parse(Dialect::Audio, "multipart/form-data; boundary=XYZ", &body).unwrap();
    assert_eq!(
        (req.model.as_str(), req.max_tokens, req.prompt_tokens),
        ("whisper", 12, 15)
    );
    assert!(req.stream && req.include_usage && !req.continuous_usage);
    assert!(parse(Dialect::Audio, "multipart/form-data", &body).is_err());
}

#[test]
fn every_listed_endpoint_is_served() {
    for (method, path) in super::ENDPOINTS {
        if method == "POST" {
            let path = path.replace("<model>", "m");
            assert!(Dialect::route(&Method::POST, &path).is_some(), "{path}");
        }
    }
}

/// A conversation's prompt is its history's words in order (a call's arguments, a
/// result and its call id included), so each turn's begins with the turn before's, and its
/// token count is those words; Anthropic's breakpoint on a `tool_result` block covers all.
#[test]
fn a_conversation_is_counted_and_keyed_by_its_whole_history() {
    let result = r#"{"order_id":"A-4821","tracking_code":"TRK-9F2C41AB"}"#;
    let arguments = r#"{"order_id":"A-4821"}"#;
    let ask = serde_json::json!({"role": "user", "content": "Where is order A-4821 now?"});
    let turn1 = serde_json::json!({"messages": [{"role": "system", "content": "Be brief."}, ask]});
    let mut turn2 = turn1.clone();
    let history = turn2["messages"].as_array_mut().unwrap();
    history.push(
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_x",
        "type": "function", "function": {"name": "get_order_status", "arguments": arguments}}]}),
    );
    history.push(serde_json::json!({"role": "tool", "tool_call_id": "call_x", "content": result}));
    let [turn1, turn2] =
        [turn1, turn2].map(|body| parse(Dialect::Chat, "", body.to_string().as_bytes()).unwrap());
    assert!(turn2.prompt.starts_with(&turn1.prompt));
    assert!(turn2.prompt.contains(arguments) && turn2.prompt.contains(result));
    for turn in [&turn1, &turn2] {
        assert_eq!(
            turn.prompt_tokens,
            turn.prompt.split_whitespace().count() as u64
        );
    }
    let anthropic = serde_json::json!({"max_tokens": 8, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Where is order A-4821 now?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_order_status",
            "input": {"order_id": "A-4821"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result,
            "cache_control": {"type": "ephemeral"}}]}]});
    let anthropic = parse(Dialect::Anthropic, "", anthropic.to_string().as_bytes()).unwrap();
    assert_eq!(
        anthropic.prompt_tokens,
        anthropic.prompt.split_whitespace().count() as u64
    );
    assert_eq!(anthropic.cache_breakpoint, Some(anthropic.prompt_tokens));
    assert_eq!(anthropic.block_ends, [5, 6, anthropic.prompt_tokens]);
    let responses = serde_json::json!({"input": [
        {"role": "user", "content": "Where is order A-4821 now?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_order_status", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_1", "output": result}]});
    let responses = parse(Dialect::Responses, "", responses.to_string().as_bytes()).unwrap();
    assert_eq!(
        responses.prompt_tokens,
        responses.prompt.split_whitespace().count() as u64
    );
    assert!(responses.prompt.contains(result) && responses.prompt.contains(arguments));
}
