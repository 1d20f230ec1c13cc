//! Structured answers: a request that asks for JSON (`response_format`, Responses
//! `text.format`, TGI `grammar`) or declares tools gets an answer that follows its schema,
//! built from the schema and the prompt's words (the toy model's knowledge: a string is
//! the prompt's last capitalized word, so "the weather in Paris" calls with
//! `{"city": "Paris"}`), streamed a few characters per token. The structured faults break
//! it the ways real servers were seen to: arguments of the wrong type, a call written as
//! text in `content`, whitespace until the length limit, a 400 for a schema keyword.

use serde_json::{Map, Value, json};

use super::faults::Fault;

/// Characters of JSON per simulated token.
const CHARS_PER_TOKEN: usize = 4;

/// What a request asked of its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimStructure {
    /// The schema of a JSON answer (`{"type": "object"}` for `json_object`).
    pub schema: Option<Value>,
    /// Declared functions and their parameter schemas.
    pub tools: Vec<(String, Value)>,
    /// `tool_choice`: `None` for auto (or absent), the name when it names one.
    pub choice: Choice,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Auto,
    None,
    Required,
    Named(String),
}

/// The answer's shape: text (a JSON answer, or a call spelt out as text), or calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Text(Vec<String>),
    /// Tool calls, streamed one after another: the pieces of every call's arguments in
    /// order, call `i`'s from `starts[i]`.
    Calls {
        calls: Vec<Call>,
        pieces: Vec<String>,
        starts: Vec<usize>,
    },
}

/// A tool call's head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Its id (`None`: the dialect's fixed one, as a single structured call has).
    pub id: Option<String>,
    pub name: String,
}

impl Answer {
    /// Calls of `arguments` (each call's pieces), at most `limit` pieces in all: a call
    /// cut off there is cut short, one after it is not made.
    pub fn calls(calls: Vec<(Call, Vec<String>)>, limit: usize) -> Self {
        let (mut heads, mut pieces, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        for (call, arguments) in calls {
            if pieces.len() >= limit {
                break;
            }
            starts.push(pieces.len());
            heads.push(call);
            pieces.extend(arguments.into_iter().take(limit - pieces.len()));
        }
        Self::Calls {
            calls: heads,
            pieces,
            starts,
        }
    }

    pub fn pieces(&self) -> &[String] {
        match self {
            Self::Text(p) | Self::Calls { pieces: p, .. } => p,
        }
    }

    /// The calls' heads (none for text).
    pub fn heads(&self) -> &[Call] {
        match self {
            Self::Text(_) => &[],
            Self::Calls { calls, .. } => calls,
        }
    }

    /// The pieces `from..to` split by the call they belong to: (call index, whether the
    /// call starts here, its pieces' range). Text is one run of call 0.
    pub fn runs(&self, from: usize, to: usize) -> Vec<(usize, bool, std::ops::Range<usize>)> {
        let Self::Calls { starts, .. } = self else {
            return vec![(0, false, from..to)];
        };
        let mut runs = Vec::new();
        let mut at = from;
        while at < to {
            let call = starts.partition_point(|&s| s <= at).saturating_sub(1);
            let end = starts.get(call + 1).map_or(to, |&next| next.min(to));
            runs.push((call, starts.get(call) == Some(&at), at..end));
            at = end;
        }
        runs
    }
}

/// `text` in pieces of `per_piece` characters.
pub fn chunk_chars(text: &str, per_piece: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(per_piece.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// Where a dialect asks for a JSON answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatAt {
    /// Chat and completions `response_format`.
    ResponseFormat,
    /// Responses `text.format`.
    TextFormat,
    /// TGI `parameters.grammar` of type `json`.
    Grammar,
    /// Nowhere: tools only.
    None,
}

/// The structure `body` asks for (its JSON answer's schema at `format`), if any.
pub fn parse(format: FormatAt, body: &Value) -> Option<SimStructure> {
    let schema_of = |format: &Value| match format.get("type").and_then(Value::as_str) {
        Some("json_object") => Some(json!({"type": "object"})),
        Some("json_schema") => format
            .get("json_schema")
            .and_then(|s| s.get("schema"))
            .or_else(|| format.get("schema"))
            .cloned(),
        _ => None,
    };
    let schema = match format {
        FormatAt::ResponseFormat => body.get("response_format").and_then(schema_of),
        FormatAt::TextFormat => body
            .get("text")
            .and_then(|t| t.get("format"))
            .and_then(schema_of),
        FormatAt::Grammar => body
            .get("parameters")
            .and_then(|p| p.get("grammar"))
            .filter(|g| g.get("type").and_then(Value::as_str) == Some("json"))
            .and_then(|g| g.get("value"))
            .cloned(),
        FormatAt::None => None,
    };
    let tools: Vec<(String, Value)> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| {
            // Chat nests the function; Responses and Anthropic are flat.
            let f = tool.get("function").unwrap_or(tool);
            let name = f.get("name")?.as_str()?.to_owned();
            let parameters = f
                .get("parameters")
                .or_else(|| f.get("input_schema"))
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            Some((name, parameters))
        })
        .collect();
    let choice = match body.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => Choice::None,
        Some(Value::String(s)) if s == "required" => Choice::Required,
        Some(Value::Object(c)) => {
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| c.get("name"))
                .and_then(Value::as_str);
            match (c.get("type").and_then(Value::as_str), name) {
                (_, Some(name)) => Choice::Named(name.to_owned()),
                (Some("any"), None) => Choice::Required,
                (Some("none"), None) => Choice::None,
                _ => Choice::Auto,
            }
        }
        _ => Choice::Auto,
    };
    (schema.is_some() || !tools.is_empty()).then_some(SimStructure {
        schema,
        tools,
        choice,
    })
}

/// The answer to `prompt`, of at most `max_tokens` pieces, with `fault` applied.
pub fn answer(s: &SimStructure, prompt: &str, max_tokens: u64, fault: Option<Fault>) -> Answer {
    let call = match &s.choice {
        Choice::None => None,
        Choice::Named(name) => s.tools.iter().find(|(n, _)| n == name),
        // The tool whose name's words the prompt mentions, else the first.
        Choice::Auto | Choice::Required => s
            .tools
            .iter()
            .find(|(n, _)| mentions(prompt, n))
            .or(s.tools.first()),
    };
    let value = match call {
        Some((_, parameters)) => instance(parameters, prompt),
        None => instance(s.schema.as_ref().unwrap_or(&json!({})), prompt),
    };
    let mut text = value.to_string();
    let mut per_piece = CHARS_PER_TOKEN;
    let mut as_text = call.is_none();
    match fault {
        Some(Fault::WrongArgumentType) => text = "false".into(),
        Some(Fault::ToolCallAsText) => {
            if let Some((name, _)) = call {
                text = format!(
                    "<tool_call>\n{}\n</tool_call>",
                    json!({"name": name, "arguments": value})
                );
                as_text = true;
            }
        }
        Some(Fault::WhitespaceLoop) => {
            let n = usize::try_from(max_tokens).unwrap_or(usize::MAX).min(4096);
            let pieces = std::iter::once("{".to_owned())
                .chain(std::iter::repeat_n("\n".to_owned(), n.saturating_sub(1)))
                .collect();
            return wrap(call, as_text, pieces);
        }
        Some(Fault::SplitArguments) => per_piece = 1,
        _ => {}
    }
    let limit = usize::try_from(max_tokens).unwrap_or(usize::MAX).max(1);
    let pieces = chunk_chars(&text, per_piece)
        .into_iter()
        .take(limit)
        .collect();
    wrap(call, as_text, pieces)
}

fn wrap(call: Option<&(String, Value)>, as_text: bool, pieces: Vec<String>) -> Answer {
    match call {
        Some((name, _)) if !as_text => Answer::Calls {
            calls: vec![Call {
                id: None,
                name: name.clone(),
            }],
            pieces,
            starts: vec![0],
        },
        _ => Answer::Text(pieces),
    }
}

/// `get_time` is mentioned by "What time is it?": a word of its name other than `get`.
fn mentions(prompt: &str, name: &str) -> bool {
    let prompt = prompt.to_lowercase();
    name.split('_')
        .filter(|w| !w.is_empty() && *w != "get")
        .any(|w| prompt.contains(&w.to_lowercase()))
}

/// A value of `schema`: `const`, the first of `enum`, every property of an object, the
/// minimum count of an array's items; a string is the prompt's last capitalized word.
pub fn instance(schema: &Value, prompt: &str) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return instance(first, prompt);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.first().and_then(Value::as_str).unwrap_or("object"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut object = Map::new();
            for (key, property) in schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                object.insert(key.clone(), instance(property, prompt));
            }
            Value::Object(object)
        }
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1);
            let item = instance(schema.get("items").unwrap_or(&json!({})), prompt);
            Value::Array(vec![item; n.min(16) as usize])
        }
        "integer" => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(1.5)),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => Value::from(last_capitalized(prompt)),
    }
}

fn last_capitalized(prompt: &str) -> String {
    prompt
        .split(|c: char| !c.is_alphanumeric())
        .skip(1)
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
        .last()
        .unwrap_or("sim")
        .to_owned()
}

#[cfg(test)]
mod tests;
