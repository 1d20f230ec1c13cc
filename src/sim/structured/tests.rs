use super::*;

fn weather() -> Value {
    json!({"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}}],
        "tool_choice": "required"})
}

#[test]
fn a_call_names_the_tool_the_prompt_mentions_with_its_words() {
    let s = parse(FormatAt::ResponseFormat, &weather()).unwrap();
    let call = answer(&s, "What is the weather in Paris?", 64, None);
    assert_eq!(call.heads()[0].name, "get_weather");
    assert_eq!(call.pieces().concat(), r#"{"city":"Paris"}"#);
    assert!(call.pieces().len() > 1, "streamed in pieces");
    let call = answer(&s, "What time is it in Tokyo?", 64, None);
    assert_eq!(call.heads()[0].name, "get_time");
}

#[test]
fn faults_break_the_structure_the_ways_servers_did() {
    let s = parse(FormatAt::ResponseFormat, &weather()).unwrap();
    let prompt = "What is the weather in Paris?";
    let wrong = answer(&s, prompt, 64, Some(Fault::WrongArgumentType));
    assert_eq!(wrong.pieces().concat(), "false");
    let Answer::Text(text) = answer(&s, prompt, 64, Some(Fault::ToolCallAsText)) else {
        panic!("expected text");
    };
    assert!(text.concat().starts_with("<tool_call>"));
    let looped = answer(&s, prompt, 10, Some(Fault::WhitespaceLoop));
    assert_eq!(looped.pieces().len(), 10);
    let split = answer(&s, prompt, 64, Some(Fault::SplitArguments));
    assert_eq!(split.pieces().len(), r#"{"city":"Paris"}"#.len());
}

#[test]
fn calls_split_into_runs_by_call() {
    let call = |name: &str| Call {
        id: Some(format!("call_{name}")),
        name: name.into(),
    };
    let pieces = |text: &str| chunk_chars(text, 4);
    let both = Answer::calls(
        vec![
            (call("a"), pieces("{\"x\":1}")),
            (call("b"), pieces("{\"y\":2}")),
        ],
        64,
    );
    assert_eq!(both.heads().len(), 2);
    assert_eq!(both.pieces().len(), 4);
    // A chunk spanning both calls: the rest of the first, the start of the second.
    assert_eq!(both.runs(1, 3), vec![(0, false, 1..2), (1, true, 2..3)]);
    assert_eq!(both.runs(0, 1), vec![(0, true, 0..1)]);
    // Cut at two pieces, all the first call's: the second is never made.
    assert_eq!(
        Answer::calls(
            vec![(call("a"), pieces("abcdefgh")), (call("b"), pieces("ijkl"))],
            2
        )
        .heads()
        .len(),
        1
    );
}

#[test]
fn every_dialect_spelling_is_read() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}});
    let tgi = json!({"inputs": "x", "parameters": {"grammar": {"type": "json", "value": schema}}});
    let s = parse(FormatAt::Grammar, &tgi).unwrap();
    assert_eq!(answer(&s, "x", 64, None).pieces().concat(), r#"{"n":3}"#);
    let responses =
        json!({"text": {"format": {"type": "json_schema", "name": "n", "schema": schema}}});
    assert!(
        parse(FormatAt::TextFormat, &responses)
            .unwrap()
            .schema
            .is_some()
    );
    let anthropic = json!({"tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"}});
    let s = parse(FormatAt::None, &anthropic).unwrap();
    assert_eq!(s.choice, Choice::Named("f".into()));
    assert_eq!(
        parse(FormatAt::ResponseFormat, &json!({"messages": []})),
        None
    );
}
