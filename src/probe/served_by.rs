//! Which backend served a response, where the target's session check names headers that
//! say (a gateway's `x-served-by`, llm-d's `x-session-token`): read with the response's
//! head, before its body, so a refused turn names its backend too.

use http::{HeaderMap, HeaderName};

/// The backend a response names: the first of `names` it carries. llm-d's
/// `x-session-token` is the base64 of the pod's `namespace/name`, read as that.
pub fn served_by(headers: &HeaderMap, names: &[HeaderName]) -> Option<String> {
    use base64::Engine;
    names.iter().find_map(|name| {
        let value = headers.get(name)?.to_str().ok()?.trim();
        if value.is_empty() {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .filter(|s| s.contains('/') && s.chars().all(|c| c.is_ascii_graphic()));
        Some(crate::error::snippet(
            &decoded.unwrap_or_else(|| value.to_owned()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_read_from_the_first_header_that_names_it() {
        let mut headers = HeaderMap::new();
        let names = [
            HeaderName::from_static("x-served-by"),
            HeaderName::from_static("x-session-token"),
        ];
        assert_eq!(served_by(&headers, &names), None);
        headers.insert("x-session-token", "ZGVmYXVsdC92bGxtLTA=".parse().unwrap());
        assert_eq!(
            served_by(&headers, &names).as_deref(),
            Some("default/vllm-0")
        );
        headers.insert("x-served-by", "replica-2".parse().unwrap());
        assert_eq!(served_by(&headers, &names).as_deref(), Some("replica-2"));
        // A plain name that happens to be valid base64 stays itself.
        headers.insert("x-served-by", "abcd".parse().unwrap());
        assert_eq!(served_by(&headers, &names).as_deref(), Some("abcd"));
    }
}
