//! llama-server's adapters (`--lora FILE`, repeatable): listed at `GET /lora-adapters` as
//! `[{"id", "path", "scale"}]`, not in `/v1/models`, and chosen per request by a `lora`
//! list of `{"id", "scale"}` rather than by `model`. An id the list leaves out is at scale
//! 0, so the base model is every id at 0 (an empty or absent list means the server's
//! global scales, 1 by default). Every request also sends `cache_prompt: false`: the
//! server's prompt cache keeps state computed under another adapter set and reuses it
//! (llama.cpp #26207), which would make a healthy adapter read `base_served`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

/// The adapters of a `/lora-adapters` answer by name (the file name without `.gguf`; the
/// id appended where two share one), each with its path and id.
pub fn adapters_of(list: &Value) -> BTreeMap<String, (String, i64)> {
    let mut found = BTreeMap::new();
    for entry in list.as_array().into_iter().flatten() {
        let (Some(id), Some(path)) = (
            entry.get("id").and_then(Value::as_i64),
            entry.get("path").and_then(Value::as_str),
        ) else {
            continue;
        };
        let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
        let stem = file.strip_suffix(".gguf").unwrap_or(file);
        let stem: String = stem.chars().take(128).collect();
        let name = match found.contains_key(&stem) || stem.is_empty() {
            true => format!("{stem}#{id}"),
            false => stem,
        };
        found.insert(name, (path.to_owned(), id));
    }
    found
}

/// The body fields that ask for adapter `id` alone at scale 1 (`None`: the base model).
pub fn selection(ids: &[i64], chosen: Option<i64>) -> Arc<Map<String, Value>> {
    let lora: Vec<Value> = ids
        .iter()
        .map(|&id| json!({"id": id, "scale": if Some(id) == chosen { 1.0 } else { 0.0 }}))
        .collect();
    let mut fields = Map::new();
    fields.insert("lora".into(), Value::Array(lora));
    fields.insert("cache_prompt".into(), Value::Bool(false));
    Arc::new(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_are_named_by_their_file() {
        let list = json!([
            {"id": 0, "path": "/models/lora-a.gguf", "scale": 1.0},
            {"id": 1, "path": "other/lora-a.gguf", "scale": 1.0},
            {"id": 2, "path": "sql", "scale": 0.0},
            {"id": "3", "path": "bad-id.gguf"},
            {"path": "no-id.gguf"},
        ]);
        let found = adapters_of(&list);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found["lora-a"], ("/models/lora-a.gguf".into(), 0));
        assert_eq!(found["lora-a#1"].1, 1);
        assert_eq!(found["sql"].1, 2);
        assert!(adapters_of(&json!({"not": "a list"})).is_empty());
    }

    #[test]
    fn the_base_is_every_adapter_at_zero() {
        let base = selection(&[0, 1], None);
        assert_eq!(
            base["lora"],
            json!([{"id": 0, "scale": 0.0}, {"id": 1, "scale": 0.0}])
        );
        assert_eq!(base["cache_prompt"], json!(false));
        let one = selection(&[0, 1], Some(1));
        assert_eq!(
            one["lora"],
            json!([{"id": 0, "scale": 0.0}, {"id": 1, "scale": 1.0}])
        );
    }
}
