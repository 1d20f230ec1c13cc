//! One JSON Schema as the canary holds it: compiled once at configuration time under the
//! draft it declares, with `format` asserted, and the smallest answer it plausibly accepts
//! (what `inferprobe check` weighs a structured prompt's budget against).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A compiled JSON Schema, with the JSON it was compiled from (what is sent).
#[derive(Clone)]
pub struct Schema {
    pub json: Value,
    validator: Arc<jsonschema::Validator>,
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl Eq for Schema {}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schema({})", self.json)
    }
}

/// Where a value broke its schema: the keyword's path in the schema, the value's path in
/// the instance, and the validator's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    pub schema_path: String,
    pub instance_path: String,
    pub message: String,
}

impl Schema {
    /// Compile under the draft the schema declares in `$schema` (zod-to-json-schema and
    /// Pydantic v1 emit draft-07, whose tuple `items` 2020-12 refuses), 2020-12 when it
    /// declares none. `format` is asserted (`email`, `date-time`, `uuid`, …), as OpenAI's
    /// strict mode and the agents' validators assert it.
    pub fn compile(json: Value) -> Result<Self, String> {
        let declared = json.get("$schema").and_then(Value::as_str);
        let draft = match declared {
            None => jsonschema::Draft::Draft202012,
            Some(uri) => match jsonschema::Draft::default().detect(&json) {
                jsonschema::Draft::Unknown => {
                    return Err(format!(
                        "declares `$schema` {uri:?}, which is none of the drafts it can be checked by (4, 6, 7, 2019-09, 2020-12)"
                    ));
                }
                draft => draft,
            },
        };
        let validator = jsonschema::options()
            .with_draft(draft)
            .should_validate_formats(true)
            .build(&json)
            .map_err(|e| format!("not a usable JSON Schema ({}): {e}", draft_name(draft)))?;
        Ok(Self {
            json,
            validator: Arc::new(validator),
        })
    }

    /// The first violation, if any.
    pub fn check(&self, value: &Value) -> Result<(), SchemaError> {
        match self.validator.validate(value) {
            Ok(()) => Ok(()),
            Err(e) => Err(SchemaError {
                schema_path: e.schema_path().to_string(),
                instance_path: e.instance_path().to_string(),
                message: crate::error::snippet(&e.to_string()),
            }),
        }
    }
}

/// The smallest value `schema` plausibly accepts: its required properties only, empty
/// strings and lists at their minimum length, the first `enum` value. An estimate for a
/// warning, not a validator: `$ref` and the rarer keywords are read as "anything" (null).
pub(super) fn smallest(schema: &Value, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .map(|o| smallest(o, depth + 1))
                .min_by_key(|v| v.to_string().len())
                .unwrap_or(Value::Null);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).next().unwrap_or(""),
        _ => "",
    };
    let at_least =
        |key: &str| schema.get(key).and_then(Value::as_u64).unwrap_or(0).min(64) as usize;
    match kind {
        "string" => Value::from("x".repeat(at_least("minLength"))),
        "integer" | "number" => Value::from(0),
        "boolean" => Value::Bool(false),
        "array" => {
            let item = schema
                .get("items")
                .map_or(Value::Null, |i| smallest(i, depth + 1));
            Value::Array(vec![item; at_least("minItems")])
        }
        "object" => {
            let properties = schema.get("properties");
            let required = schema.get("required").and_then(Value::as_array);
            let object = required
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|name| {
                    let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                    (name.to_owned(), smallest(property, depth + 1))
                })
                .collect();
            Value::Object(object)
        }
        _ => Value::Null,
    }
}

fn draft_name(draft: jsonschema::Draft) -> &'static str {
    match draft {
        jsonschema::Draft::Draft4 => "draft-04",
        jsonschema::Draft::Draft6 => "draft-06",
        jsonschema::Draft::Draft7 => "draft-07",
        jsonschema::Draft::Draft201909 => "2019-09",
        _ => "2020-12",
    }
}
