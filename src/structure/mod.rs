//! What an agent asks of an answer: a JSON structure (`response_format`) or a call of one
//! of its tools (`tools`, `tool_choice`). Written once in the OpenAI chat spelling (in a
//! canary prompts line or a target's keys), validated and compiled here at configuration
//! time; each backend spells it in its own request format ([`crate::backend::Backend::structure`]),
//! and the canary judges the answer against it ([`crate::canary::structured`]).
//!
//! Schemas are checked under the draft they declare (2020-12 when none), compiled with the
//! `jsonschema` crate ([`schema`]; no remote references: a schema that needs the network
//! fails `inferprobe check`).

use serde_json::{Map, Value};

mod schema;

use schema::smallest;
pub use schema::{Schema, SchemaError};

/// `response_format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Any JSON object.
    JsonObject,
    JsonSchema {
        name: String,
        schema: Schema,
        strict: Option<bool>,
    },
}

/// A declared function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Schema,
    /// OpenAI's strict function calling, as the prompts line says: the agents' own
    /// requests use it, and a server's best-effort calling is not what they get.
    pub strict: Option<bool>,
}

impl Function {
    /// A format's spelling of this function: `tool` (its name and schema under the
    /// format's keys) with the description added when there is one.
    pub fn spelled(&self, mut tool: Value) -> Value {
        if let Some(d) = &self.description {
            tool["description"] = Value::from(d.as_str());
        }
        tool
    }

    /// The same, with `strict` when the prompts line set it (the OpenAI APIs take it).
    pub fn spelled_strict(&self, tool: Value) -> Value {
        let mut tool = self.spelled(tool);
        if let Some(strict) = self.strict {
            tool["strict"] = Value::Bool(strict);
        }
        tool
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// What an agent relies on a structured answer for (the `capability` label): each breaks on
/// its own (a `response_format` backend, a tool parser, `required`'s grammar), and one
/// broken is an outage for every agent using it, whatever the others do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// `response_format`: a JSON answer (a schema, or any object).
    Json,
    /// `tool_choice` names the function to call.
    NamedTool,
    /// `tool_choice: "required"`: some declared function must be called.
    RequiredTool,
    /// Tools offered, the model free to answer in text (`auto`, or no `tool_choice`).
    AutoTool,
}

impl Capability {
    pub const ALL: [Self; 4] = [
        Self::Json,
        Self::NamedTool,
        Self::RequiredTool,
        Self::AutoTool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::NamedTool => "named_tool",
            Self::RequiredTool => "required_tool",
            Self::AutoTool => "auto_tool",
        }
    }
}

/// What a request asks of its answer's structure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Structure {
    pub response_format: Option<Format>,
    pub tools: Vec<Function>,
    pub tool_choice: Option<ToolChoice>,
}

impl Structure {
    /// The answer must be a tool call (`required`, or a named function).
    pub fn requires_tool_call(&self) -> bool {
        matches!(
            self.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Named(_))
        )
    }

    /// Which capability an answer to this exercises: a required call first (it cannot carry
    /// a `response_format`), then a JSON answer, then offered tools.
    pub fn capability(&self) -> Capability {
        match &self.tool_choice {
            Some(ToolChoice::Named(_)) => Capability::NamedTool,
            Some(ToolChoice::Required) => Capability::RequiredTool,
            _ if self.response_format.is_some() => Capability::Json,
            _ => Capability::AutoTool,
        }
    }

    /// The answer may be a tool call.
    pub fn allows_tool_call(&self) -> bool {
        !self.tools.is_empty() && self.tool_choice != Some(ToolChoice::None)
    }

    /// The shortest answer that could pass, as text: the JSON (or, for a call, the name and
    /// arguments as vLLM's `required` spells them); what `check` weighs the budget against.
    pub fn smallest_answer(&self) -> String {
        if let Some(format) = &self.response_format {
            return match format {
                Format::JsonObject => "{}".into(),
                Format::JsonSchema { schema, .. } => smallest(&schema.json, 0).to_string(),
            };
        }
        let named = match &self.tool_choice {
            Some(ToolChoice::Named(name)) => self.function(name),
            _ => None,
        };
        let calls: Vec<&Function> = match named {
            Some(f) => vec![f],
            None => self.tools.iter().collect(),
        };
        calls
            .into_iter()
            .map(|f| {
                serde_json::json!([{"name": f.name, "parameters": smallest(&f.parameters.json, 0)}])
                    .to_string()
            })
            .min_by_key(String::len)
            .unwrap_or_default()
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.tools.iter().find(|f| f.name == name)
    }

    /// Read the three fields as the OpenAI chat API spells them; `None` when all are
    /// absent. Errors name the field.
    pub fn parse(
        response_format: Option<&Value>,
        tools: Option<&Value>,
        tool_choice: Option<&Value>,
    ) -> Result<Option<Self>, (&'static str, String)> {
        if response_format.is_none() && tools.is_none() && tool_choice.is_none() {
            return Ok(None);
        }
        let response_format = response_format
            .map(parse_format)
            .transpose()
            .map_err(|e| ("response_format", e))?
            .flatten();
        let tools = tools
            .map(parse_tools)
            .transpose()
            .map_err(|e| ("tools", e))?
            .unwrap_or_default();
        let tool_choice = tool_choice
            .map(parse_choice)
            .transpose()
            .map_err(|e| ("tool_choice", e))?;
        let structure = Self {
            response_format,
            tools,
            tool_choice,
        };
        match &structure.tool_choice {
            Some(ToolChoice::Required) if structure.tools.is_empty() => {
                return Err(("tool_choice", "\"required\" needs `tools`".into()));
            }
            Some(ToolChoice::Named(name)) if structure.function(name).is_none() => {
                return Err((
                    "tool_choice",
                    format!("names `{name}`, which `tools` does not declare"),
                ));
            }
            _ => {}
        }
        if structure.requires_tool_call() && structure.response_format.is_some() {
            return Err((
                "response_format",
                "a request whose answer must be a tool call has no text to format: set `response_format` or a required `tool_choice`, not both".into(),
            ));
        }
        Ok(Some(structure))
    }
}

fn parse_format(value: &Value) -> Result<Option<Format>, String> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or("expected an object with a `type`: \"json_object\" or \"json_schema\"")?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(Format::JsonObject)),
        "json_schema" => {
            let spec = value
                .get("json_schema")
                .and_then(Value::as_object)
                .ok_or("`json_schema` must be an object with `name` and `schema`")?;
            let name = spec
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or("`json_schema.name` is required")?;
            let schema = spec
                .get("schema")
                .ok_or("`json_schema.schema` is required")?;
            Ok(Some(Format::JsonSchema {
                name: name.to_owned(),
                schema: Schema::compile(schema.clone())?,
                strict: spec.get("strict").and_then(Value::as_bool),
            }))
        }
        other => Err(format!(
            "type `{other}`: expected \"json_object\" or \"json_schema\""
        )),
    }
}

fn parse_tools(value: &Value) -> Result<Vec<Function>, String> {
    let list = value
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or("expected a non-empty list of {\"type\": \"function\", \"function\": {...}}")?;
    let mut functions: Vec<Function> = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let function = tool
            .get("function")
            .and_then(Value::as_object)
            .filter(|_| tool.get("type").and_then(Value::as_str) == Some("function"))
            .ok_or_else(|| {
                format!("[{i}]: expected {{\"type\": \"function\", \"function\": {{...}}}}")
            })?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("[{i}]: `function.name` is required"))?;
        if functions.iter().any(|f| f.name == name) {
            return Err(format!("[{i}]: `{name}` is declared twice"));
        }
        let parameters = function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "[{i}] `{name}`: `parameters` must be an object schema (`\"type\": \"object\"`): arguments are a JSON object"
            ));
        }
        functions.push(Function {
            name: name.to_owned(),
            description: function
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            parameters: Schema::compile(parameters).map_err(|e| format!("[{i}] `{name}`: {e}"))?,
            strict: function.get("strict").and_then(Value::as_bool),
        });
    }
    Ok(functions)
}

fn parse_choice(value: &Value) -> Result<ToolChoice, String> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(format!(
                "`{other}`: expected \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
            )),
        },
        Value::Object(map) => map
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(|n| ToolChoice::Named(n.to_owned()))
            .ok_or_else(|| {
                "expected {\"type\": \"function\", \"function\": {\"name\": ...}}".into()
            }),
        _ => Err("expected a string or an object".into()),
    }
}

/// The OpenAI chat spelling (chat completions; vLLM's and SGLang's completions take
/// `response_format` too).
pub fn openai_format(format: &Format) -> Value {
    match format {
        Format::JsonObject => serde_json::json!({"type": "json_object"}),
        Format::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let mut spec = Map::new();
            spec.insert("name".into(), Value::from(name.as_str()));
            spec.insert("schema".into(), schema.json.clone());
            if let Some(strict) = strict {
                spec.insert("strict".into(), Value::Bool(*strict));
            }
            serde_json::json!({"type": "json_schema", "json_schema": spec})
        }
    }
}

/// The OpenAI chat spelling of the tools.
pub fn openai_tools(tools: &[Function]) -> Value {
    tools
        .iter()
        .map(|f| {
            let function = f.spelled_strict(
                serde_json::json!({"name": f.name, "parameters": f.parameters.json}),
            );
            serde_json::json!({"type": "function", "function": function})
        })
        .collect()
}

pub fn openai_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Named(name) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    }

    #[test]
    fn a_named_tool_must_be_declared() {
        let named = json!({"type": "function", "function": {"name": "get_time"}});
        let e = Structure::parse(None, Some(&weather()), Some(&named)).unwrap_err();
        assert_eq!(e.0, "tool_choice");
        assert!(e.1.contains("get_time"), "{}", e.1);
        let e = Structure::parse(None, None, Some(&json!("required"))).unwrap_err();
        assert!(e.1.contains("needs `tools`"), "{}", e.1);
    }

    #[test]
    fn schemas_are_compiled_and_checked_with_their_path() {
        let s = Structure::parse(None, Some(&weather()), Some(&json!("required")))
            .unwrap()
            .unwrap();
        let f = s.function("get_weather").unwrap();
        assert!(f.parameters.check(&json!({"city": "Paris"})).is_ok());
        let e = f.parameters.check(&json!({"city": 3})).unwrap_err();
        assert_eq!(e.schema_path, "/properties/city/type");
        assert_eq!(e.instance_path, "/city");
        let e = f.parameters.check(&json!(false)).unwrap_err();
        assert_eq!(e.schema_path, "/type");
        let bad =
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}});
        let e = Structure::parse(Some(&bad), None, None).unwrap_err();
        assert_eq!(e.0, "response_format");
    }

    #[test]
    fn the_openai_spelling_round_trips() {
        let format = json!({"type": "json_schema", "json_schema": {"name": "capital", "schema": {"type": "object"}, "strict": true}});
        let s = Structure::parse(Some(&format), Some(&weather()), Some(&json!("auto")))
            .unwrap()
            .unwrap();
        assert_eq!(openai_format(s.response_format.as_ref().unwrap()), format);
        assert_eq!(openai_tools(&s.tools), weather());
        assert_eq!(
            openai_choice(&ToolChoice::Named("f".into())),
            json!({"type": "function", "function": {"name": "f"}})
        );
    }
}
