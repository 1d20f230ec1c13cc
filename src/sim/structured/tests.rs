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
    let Answer::Call { name, pieces } = answer(&s, "What is the weather in Paris?", 64, None)
    else {
        panic!("expected a call");
    };
    assert_eq!(name, "get_weather");
    assert_eq!(pieces.concat(), r#"{"city":"Paris"}"#);
    assert!(pieces.len() > 1, "streamed in pieces");
    let Answer::Call { name, .. } = answer(&s, "What time is it in Tokyo?", 64, None) else {
        panic!("expected a call");
    };
    assert_eq!(name, "get_time");
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
