//! What a replica serves: its adapters as its server lists them (vLLM's `/v1/models`
//! entries with a `parent`, llama-server's `/lora-adapters`), and whether a refusal names
//! no model the server has.

use std::collections::BTreeMap;

use crate::endpoint::adapters::AdapterSpec;
use crate::error::ProbeError;
use crate::probe::Prober;

/// The longest adapter name taken from a listing (as configured names): a label value.
const MAX_NAME: usize = 256;

/// The adapters of `model` in a `/v1/models` answer: entries whose `parent` is it (or,
/// where `model` is one of the base model's served names, any of them: vLLM gives every
/// adapter the first name as its parent), by name, with the path they were loaded from.
/// A name longer than [`MAX_NAME`] is left out.
pub(super) fn adapters_of(models: &serde_json::Value, model: &str) -> BTreeMap<String, String> {
    let entries: Vec<&serde_json::Value> = models
        .get("data")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    fn id(m: &serde_json::Value) -> Option<&str> {
        m.get("id").and_then(serde_json::Value::as_str)
    }
    fn parent(m: &serde_json::Value) -> Option<&str> {
        m.get("parent").and_then(serde_json::Value::as_str)
    }
    // The base model's names: entries without a parent.
    let bases: Vec<&str> = entries
        .iter()
        .filter(|m| parent(m).is_none())
        .filter_map(|m| id(m))
        .collect();
    let ours = |p: &str| p == model || (bases.contains(&model) && bases.contains(&p));
    entries
        .iter()
        .filter(|m| parent(m).is_some_and(ours))
        .filter_map(|m| {
            let id = id(m)?;
            let root = m.get("root").and_then(serde_json::Value::as_str);
            let fits = !id.is_empty() && id.len() <= MAX_NAME && id != model;
            fits.then(|| (id.to_owned(), root.unwrap_or("").to_owned()))
        })
        .collect()
}

/// A request refused as naming no model the server has (vLLM's 404, a 400 that says so).
pub(super) fn refused_as_unknown(e: &ProbeError) -> bool {
    let ProbeError::Status { status, body } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    status.as_u16() == 404
        || (status.as_u16() == 400
            && (body.contains("does not exist") || body.contains("not found")))
}
/// What the replica lists (name → path), and llama-server's ids where it is one.
pub(super) type Listing = (BTreeMap<String, String>, Option<BTreeMap<String, i64>>);

pub(super) async fn listing(prober: &Prober, spec: &AdapterSpec) -> Result<Listing, String> {
    let model = &prober.target.model;
    let models = match spec.llama_cpp {
        Some(true) => None,
        _ => Some(prober.models(false).await?),
    };
    let owned_by_llama = models.iter().any(|m| {
        let entries = m.get("data").and_then(serde_json::Value::as_array);
        entries
            .into_iter()
            .flatten()
            .any(|e| e.get("owned_by").and_then(serde_json::Value::as_str) == Some("llamacpp"))
    });
    if spec.llama_cpp.unwrap_or(owned_by_llama) {
        let found = super::llama::adapters_of(&prober.models(true).await?);
        let here = found
            .iter()
            .map(|(n, (root, _))| (n.clone(), root.clone()))
            .collect();
        let ids = found.into_iter().map(|(n, (_, id))| (n, id)).collect();
        return Ok((here, Some(ids)));
    }
    let here = match (spec.discover, models) {
        (true, Some(models)) => adapters_of(&models, model),
        _ => BTreeMap::new(),
    };
    Ok((here, None))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_are_the_entries_whose_parent_is_the_model() {
        let models = serde_json::json!({"data": [
            {"id": "base", "parent": null, "root": "base"},
            {"id": "a", "parent": "base", "root": "/p/a"},
            {"id": "b", "parent": "base"},
            {"id": "c", "parent": "other"},
            {"id": "", "parent": "base"},
            {"id": 7, "parent": "base"},
        ]});
        let found = adapters_of(&models, "base");
        assert_eq!(found.len(), 2);
        assert_eq!(found["a"], "/p/a");
        assert_eq!(found["b"], "");
        assert!(adapters_of(&serde_json::json!("garbage"), "base").is_empty());
    }

    #[test]
    fn a_refusal_naming_no_model_is_told_from_other_failures() {
        let status = |code: u16, body: &str| ProbeError::Status {
            status: http::StatusCode::from_u16(code).unwrap_or_default(),
            body: body.into(),
        };
        assert!(refused_as_unknown(&status(404, "")));
        assert!(refused_as_unknown(&status(
            400,
            "The model `x` does not exist."
        )));
        assert!(!refused_as_unknown(&status(400, "max_tokens too large")));
        assert!(!refused_as_unknown(&status(500, "not found")));
    }

    #[test]
    fn an_alias_of_the_base_model_finds_its_adapters_and_long_names_are_left_out() {
        let long = "x".repeat(MAX_NAME + 1);
        let models = serde_json::json!({"data": [
            {"id": "first", "parent": null},
            {"id": "alias", "parent": null},
            {"id": "a", "parent": "first", "root": "/a"},
            {"id": long, "parent": "first"},
        ]});
        assert_eq!(adapters_of(&models, "alias").len(), 1);
        assert_eq!(adapters_of(&models, "first").len(), 1);
        assert!(adapters_of(&models, "other").is_empty());
    }
}
