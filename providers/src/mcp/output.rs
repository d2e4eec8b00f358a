//! A tool's structured result judged against the `outputSchema` its
//! server declared in `tools/list` (the specification: a server MUST give
//! structured results that conform; a client SHOULD validate them). Pure:
//! a schema and a result in, the first mismatch with its JSON path out.
//! The validator (`jsonschema`, without its remote-reference features)
//! never fetches anything: a `$ref` it cannot resolve locally is itself a
//! mismatch.

use serde_json::Value;

/// Bound on the words of one mismatch.
const MISMATCH_CHARS_MAX: usize = 500;

/// Why `result` does not match `schema`, naming the JSON path inside
/// `structuredContent`; `None` when it matches, when the tool declared no
/// output schema, or when the result is a tool error (a schema describes
/// successful results only).
pub(crate) fn mismatch(schema: Option<&Value>, result: &Value) -> Option<String> {
    let schema = schema?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let Some(structured) = result.get("structuredContent") else {
        return Some("the tool declares an outputSchema, but its result has no structuredContent".into());
    };
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Some(bounded(format!("the tool's outputSchema is not a schema this client can use: {e}"))),
    };
    let first = validator.iter_errors(structured).next()?;
    let path = first.instance_path().as_str();
    let at = if path.is_empty() { "structuredContent".to_string() } else { format!("structuredContent{path}") };
    Some(bounded(format!("{at}: {first} (the tool's outputSchema)")))
}

fn bounded(s: String) -> String {
    s.chars().take(MISMATCH_CHARS_MAX).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_is_judged_by_its_declared_schema_with_the_path() {
        let schema = json!({"type": "object", "properties": {"count": {"type": "integer"},
                            "items": {"type": "array", "items": {"type": "string"}}}, "required": ["count"]});
        let ok = json!({"content": [], "structuredContent": {"count": 3, "items": ["a"]}});
        assert_eq!(mismatch(Some(&schema), &ok), None);
        let wrong = json!({"content": [], "structuredContent": {"count": "three"}});
        let m = mismatch(Some(&schema), &wrong).unwrap();
        assert!(m.starts_with("structuredContent/count: "), "{m}");
        let deep = json!({"structuredContent": {"count": 1, "items": ["a", 7]}});
        assert!(mismatch(Some(&schema), &deep).unwrap().starts_with("structuredContent/items/1: "));
        let missing = json!({"structuredContent": {}});
        assert!(mismatch(Some(&schema), &missing).unwrap().starts_with("structuredContent: "), "the root");
        let none = json!({"content": [{"type": "text", "text": "3"}]});
        assert!(mismatch(Some(&schema), &none).unwrap().contains("no structuredContent"));
        assert_eq!(mismatch(None, &wrong), None, "no schema, nothing to judge");
        let failed = json!({"isError": true, "content": []});
        assert_eq!(mismatch(Some(&schema), &failed), None, "a tool error is not a result");
    }

    #[test]
    fn a_remote_reference_is_never_fetched() {
        let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        let m = mismatch(Some(&schema), &json!({"structuredContent": {}})).unwrap();
        assert!(m.contains("outputSchema is not a schema"), "{m}");
    }
}
