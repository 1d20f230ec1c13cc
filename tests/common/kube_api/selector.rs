//! Label and field selectors, parsed and matched as the API server does
//! (k8s.io/apimachinery/pkg/labels and pkg/fields): a selector the real server rejects is
//! rejected here too, so a client bug shows up as the same 400.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed `labelSelector`: every requirement must hold (comma means AND).
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(Self(requirements));
        }
        for part in split_outside_parens(text) {
            requirements.push(requirement(part.trim())?);
        }
        Ok(Self(requirements))
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|r| {
            let value = labels.get(&r.key).and_then(Value::as_str);
            let number = |s: &str| s.parse::<i64>().ok();
            match r.op {
                Op::Eq | Op::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotEq | Op::NotIn => !value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::Gt => value.and_then(number) > number(&r.values[0]),
                Op::Lt => value
                    .and_then(number)
                    .is_some_and(|v| Some(v) < number(&r.values[0])),
            }
        })
    }
}

/// Commas inside `in (a,b)` belong to the set, not to the AND list.
fn split_outside_parens(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn requirement(part: &str) -> Result<Requirement, String> {
    let make = |key: &str, op, values: Vec<String>| -> Result<Requirement, String> {
        let key = key.trim();
        check_key(key)?;
        for value in &values {
            check_value(value)?;
        }
        Ok(Requirement {
            key: key.to_owned(),
            op,
            values,
        })
    };
    if let Some(key) = part.strip_prefix('!') {
        return make(key, Op::DoesNotExist, Vec::new());
    }
    if let (Some(open), true) = (part.find('('), part.ends_with(')')) {
        let mut words = part[..open].split_whitespace();
        let (Some(key), Some(word), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("unable to parse requirement: {part:?}"));
        };
        let op = match word {
            "in" => Op::In,
            "notin" => Op::NotIn,
            _ => {
                return Err(format!(
                    "unable to parse requirement: unknown operator {word:?}"
                ));
            }
        };
        let inner = &part[open + 1..part.len() - 1];
        let values = inner.split(',').map(|v| v.trim().to_owned()).collect();
        return make(key, op, values);
    }
    for (token, op) in [
        ("!=", Op::NotEq),
        ("==", Op::Eq),
        ("=", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
    ] {
        if let Some((key, value)) = part.split_once(token) {
            let value = value.trim();
            if matches!(op, Op::Gt | Op::Lt) && value.parse::<i64>().is_err() {
                return Err(format!(
                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an \
                     integer: {value:?}"
                ));
            }
            return make(key, op, vec![value.to_owned()]);
        }
    }
    make(part, Op::Exists, Vec::new())
}

/// A qualified name: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`; alphanumeric at both ends).
fn check_key(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) if !prefix.is_empty() && prefix.len() <= 253 => name,
        Some(_) => return Err(invalid(key, "prefix part must be a DNS subdomain")),
        None => key,
    };
    if name.is_empty() || !name_ok(name) {
        return Err(invalid(
            key,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character",
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || name_ok(value) {
        return Ok(());
    }
    Err(invalid(
        value,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
         or '.', and must start and end with an alphanumeric character",
    ))
}

fn name_ok(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.len() <= 63
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn invalid(what: &str, why: &str) -> String {
    format!("unable to parse requirement: Invalid value: {what:?}: {why}")
}

/// A parsed `fieldSelector`: `key=value`, `key==value` or `key!=value`, comma-separated.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// `supported` are the field labels the resource accepts; any other is a 400, as on
    /// the real server (`field label not supported: …`).
    pub fn parse(text: &str, supported: &[&str]) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (key, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                ));
            };
            let key = key.trim();
            if !supported.contains(&key) {
                return Err(format!("field label not supported: {key}"));
            }
            terms.push((key.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0
            .iter()
            .all(|(key, equal, value)| (field(object, key) == *value) == *equal)
    }
}

/// A field's value as the server's field set renders it: unset is the empty string.
fn field(object: &Value, key: &str) -> String {
    let pointer = format!("/{}", key.replace('.', "/"));
    match object.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}
