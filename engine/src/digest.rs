//! Digests (SPEC.md "Digests"): BLAKE3 over canonical JSON (sorted keys, no
//! whitespace), one key-derivation context per kind so two kinds never share
//! a digest, and length-delimited fields so concatenations cannot collide.

use serde_json::Value;

/// The kinds of digest, each with its own BLAKE3 derive-key context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    GoalContract,
    TaskMeaning,
    Dependencies,
    Request,
    Operation,
    Checkpoint,
    Plan,
    FailureFingerprint,
    /// A link of the chain over a person's acts (`store::chain`).
    ActChain,
    /// A command and its arguments, as a `--request-id` binds them.
    RequestFingerprint,
    /// A task's meaning without its validations: tells a change to the
    /// validations alone from a change to what the task does.
    TaskMeaningCore,
    /// An MCP tool's input schema, in a provider's tool inventory.
    ToolSchema,
    /// An MCP server's whole inventory: who it says it is and every tool
    /// as listed.
    ToolInventory,
    /// A plan file's bytes, as the plan cache keys them (`plan::cache`).
    PlanFile,
    /// A request by its content: target and body, not task or goal
    /// (`plan::digests::request_fingerprint`).
    RequestContent,
    /// The seal over a plan cache row (`plan::cache`).
    PlanCacheSeal,
    /// A dependency's recorded outputs, as its dependants' checkpoints
    /// carry them (`decide::reuse::cutoff`).
    UpstreamOutputs,
}

impl Kind {
    fn context(self) -> &'static str {
        match self {
            Kind::GoalContract => "engine 2026-11 goal_contract_digest v1",
            Kind::TaskMeaning => "engine 2026-11 task_meaning_digest v1",
            Kind::Dependencies => "engine 2026-11 dependency_digest v1",
            Kind::Request => "engine 2026-11 request_digest v1",
            Kind::Operation => "engine 2026-11 operation_id v1",
            Kind::Checkpoint => "engine 2026-11 checkpoint_digest v1",
            Kind::Plan => "engine 2026-11 plan_digest v1",
            Kind::FailureFingerprint => "engine 2026-11 failure_fingerprint v1",
            Kind::ActChain => "engine 2026-12 act chain v1",
            Kind::RequestFingerprint => "engine 2026-12 request fingerprint v1",
            Kind::TaskMeaningCore => "engine 2026-12 task_meaning_without_validations v1",
            Kind::ToolSchema => "engine 2026-12 tool_schema_digest v1",
            Kind::ToolInventory => "engine 2026-12 tool_inventory_digest v1",
            Kind::PlanFile => "engine 2026-12 plan file bytes v1",
            Kind::RequestContent => "engine 2026-12 request content v1",
            Kind::PlanCacheSeal => "engine 2026-12 plan cache seal v1",
            Kind::UpstreamOutputs => "engine 2026-12 upstream outputs v1",
        }
    }
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace,
/// numbers and strings as serde_json writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    if is_sorted(value) {
        // Already in canonical order (an action sorted at load, a map
        // built from a BTreeMap): serde_json writes the same bytes without
        // a sorted copy of every object.
        serde_json::to_writer(&mut out, value).expect("a JSON value serializes");
    } else {
        write_canonical(value, &mut out);
    }
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k).expect("a string serializes");
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        other => serde_json::to_writer(&mut *out, other).expect("a scalar serializes"),
    }
}

/// Is every object's key order already sorted (by UTF-8 bytes)?
pub fn is_sorted(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.keys().zip(m.keys().skip(1)).all(|(a, b)| a < b) && m.values().all(is_sorted),
        Value::Array(items) => items.iter().all(is_sorted),
        _ => true,
    }
}

/// Sort every object's keys in place, recursively, so that serializing the
/// value writes canonical JSON directly.
pub fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// A digest builder: named fields, each written as
/// `len(name) name len(value) value` with u64 little-endian lengths.
pub struct Digester(blake3::Hasher);

const KINDS: [Kind; 17] = [
    Kind::GoalContract,
    Kind::TaskMeaning,
    Kind::Dependencies,
    Kind::Request,
    Kind::Operation,
    Kind::Checkpoint,
    Kind::Plan,
    Kind::FailureFingerprint,
    Kind::ActChain,
    Kind::RequestFingerprint,
    Kind::TaskMeaningCore,
    Kind::ToolSchema,
    Kind::ToolInventory,
    Kind::PlanFile,
    Kind::PlanCacheSeal,
    Kind::RequestContent,
    Kind::UpstreamOutputs,
];

/// Each kind's key, derived once from its context string (BLAKE3's
/// key-derivation mode), then used as a keyed hash: domain separation
/// without re-deriving the key for every digest.
fn key(kind: Kind) -> &'static [u8; 32] {
    static KEYS: std::sync::OnceLock<[[u8; 32]; KINDS.len()]> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(|| KINDS.map(|k| blake3::derive_key(k.context(), b"")));
    &keys[KINDS.iter().position(|k| *k == kind).expect("every kind is listed")]
}

impl Digester {
    pub fn new(kind: Kind) -> Self {
        Digester(blake3::Hasher::new_keyed(key(kind)))
    }

    pub fn bytes(mut self, name: &str, value: &[u8]) -> Self {
        // The same bytes in two updates, not four (the name's length, the
        // name and the value's length written together): each update of
        // a few bytes cost about as much as its bytes' hashing.
        const NAME_MAX: usize = 48;
        if name.len() <= NAME_MAX {
            let mut head = [0u8; NAME_MAX + 16];
            let n = name.len();
            head[..8].copy_from_slice(&(n as u64).to_le_bytes());
            head[8..8 + n].copy_from_slice(name.as_bytes());
            head[8 + n..16 + n].copy_from_slice(&(value.len() as u64).to_le_bytes());
            self.0.update(&head[..16 + n]);
        } else {
            self.0.update(&(name.len() as u64).to_le_bytes());
            self.0.update(name.as_bytes());
            self.0.update(&(value.len() as u64).to_le_bytes());
        }
        self.0.update(value);
        self
    }

    pub fn str(self, name: &str, value: &str) -> Self {
        self.bytes(name, value.as_bytes())
    }

    pub fn json(self, name: &str, value: &Value) -> Self {
        let c = canonical_json(value);
        self.bytes(name, c.as_bytes())
    }

    /// A typed value whose serialization is canonical JSON already (its
    /// maps are `BTreeMap`s of strings, its fields in a fixed order), written
    /// without building a `Value` first.
    pub fn serialized<T: serde::Serialize>(self, name: &str, value: &T) -> Self {
        let bytes = serde_json::to_vec(value).expect("a typed value serializes");
        self.bytes(name, &bytes)
    }

    pub fn finish(self) -> String {
        // The hex copied as it is: `to_string` went through `Display`'s
        // padding, about half the cost of a short digest.
        self.0.finalize().to_hex().as_str().to_owned()
    }
}

/// Content digest of a blob (plain BLAKE3, as content addresses are).
pub fn content(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_and_drops_whitespace() {
        let a: Value = serde_json::from_str(r#"{ "b": 1, "a": {"d": [1, 2], "c": "x"} }"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"c":"x","d":[1,2]},"b":1}"#);
    }

    #[test]
    fn sorted_and_unsorted_values_write_the_same_canonical_bytes() {
        let text = r#"{"b":[{"z":1,"y":"\u0001é\"q"}],"a":{"d":null,"c":1.5}}"#;
        let unsorted: Value = serde_json::from_str(text).unwrap();
        let mut sorted = unsorted.clone();
        sort_keys(&mut sorted);
        assert!(!is_sorted(&unsorted) && is_sorted(&sorted));
        assert_eq!(canonical_json(&unsorted), canonical_json(&sorted));
        assert_eq!(canonical_json(&sorted), r#"{"a":{"c":1.5,"d":null},"b":[{"y":"\u0001é\"q","z":1}]}"#);
        // A BTreeMap serialized directly is the canonical JSON of its Value.
        let files: std::collections::BTreeMap<String, Option<String>> =
            [("b\"x".to_string(), None), ("a/é".to_string(), Some("d".to_string()))].into_iter().collect();
        let via_value = Digester::new(Kind::Checkpoint).json("files", &json!(files)).finish();
        assert_eq!(Digester::new(Kind::Checkpoint).serialized("files", &files).finish(), via_value);
    }

    #[test]
    fn kinds_are_domain_separated() {
        let v = json!({"x": 1});
        let a = Digester::new(Kind::TaskMeaning).json("v", &v).finish();
        let b = Digester::new(Kind::Request).json("v", &v).finish();
        assert_ne!(a, b);
    }

    #[test]
    fn fields_are_length_delimited() {
        let a = Digester::new(Kind::Plan).str("a", "bc").str("d", "").finish();
        let b = Digester::new(Kind::Plan).str("a", "b").str("cd", "").finish();
        assert_ne!(a, b);
    }

    /// A field is its name's length (8 bytes, little-endian), the name, the
    /// value's length and the value, hashed as one stream with the kind's
    /// key: the same digest whatever the name's length (written in one
    /// update up to 48 bytes, in three past it).
    #[test]
    fn a_digest_is_the_keyed_hash_of_its_length_delimited_fields() {
        let long = "n".repeat(100);
        for name in ["", "a", &"x".repeat(47), &"y".repeat(48), &"z".repeat(49), &long] {
            for value in [&b""[..], b"v", &[7u8; 63], &[9u8; 64], &[1u8; 2000]] {
                let mut stream = Vec::new();
                for (n, v) in [(name, value), ("second", &b"field"[..])] {
                    stream.extend_from_slice(&(n.len() as u64).to_le_bytes());
                    stream.extend_from_slice(n.as_bytes());
                    stream.extend_from_slice(&(v.len() as u64).to_le_bytes());
                    stream.extend_from_slice(v);
                }
                let want = blake3::keyed_hash(key(Kind::Request), &stream).to_hex().to_string();
                let got = Digester::new(Kind::Request).bytes(name, value).str("second", "field").finish();
                assert_eq!(got, want, "name of {} bytes, value of {}", name.len(), value.len());
            }
        }
    }
}
