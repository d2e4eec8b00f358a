//! The JSON Schema of the plan's read-back rules (a task's `observe`, a
//! provider's default `observe`).
//!
//! The plan keeps a rule as the JSON the person wrote, and the providers'
//! own parsers (`HttpObserve::from_json`, `McpObserve::from_json`) check it
//! at `engine check`, with the exact place of an error; so a rule is read
//! one way only. The types below exist for the shipped schema alone: they
//! describe the same shapes those parsers accept.

#![allow(dead_code)] // shapes for the schema, never built

use std::collections::BTreeMap;

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde_json::Value;

/// HTTP read-back: `GET url`, judged by the two matches.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpRule {
    /// URL template; `{operation_id}`, `{try}` and `{workspace}` are
    /// replaced (percent-encoded).
    url: String,
    /// The effect is there when every test holds.
    present_if: Option<HttpMatch>,
    /// The effect is not there when every test holds (never inferred).
    absent_if: Option<HttpMatch>,
}

/// Tests on an HTTP answer; all declared tests must hold.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpMatch {
    /// The status is one of these (omitted in `present_if`: any 2xx; in
    /// `absent_if`: any status).
    status: Option<Vec<u16>>,
    /// The body contains this text (placeholders filled).
    body_contains: Option<String>,
    /// The body is JSON and each JSON pointer holds exactly this value.
    json: Option<BTreeMap<String, Value>>,
}

/// MCP read-back: a `tools/call` of a read tool, judged by the two matches.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct McpRule {
    /// The read tool.
    tool: String,
    /// Its arguments; placeholders are replaced in every string.
    arguments: Option<BTreeMap<String, Value>>,
    /// The effect is there (tested on a result without `isError` only).
    present_if: Option<McpMatch>,
    /// The effect is not there (tested on any result, errors included).
    absent_if: Option<McpMatch>,
}

/// Tests on a tool result; all declared tests must hold.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct McpMatch {
    /// The result's text content contains this (placeholders filled).
    text_contains: Option<String>,
    /// Each JSON pointer into the tool result holds exactly this value.
    json: Option<BTreeMap<String, Value>>,
}

/// A provider's default HTTP read-back: a URL (200 present, nothing
/// absent) or a rule.
#[derive(JsonSchema)]
#[serde(untagged)]
enum HttpDefault {
    Url(String),
    Rule(HttpRule),
}

/// A task's read-back: the rule of its provider's kind.
#[derive(JsonSchema)]
#[serde(untagged)]
enum TaskRule {
    Http(HttpRule),
    Mcp(McpRule),
}

pub(super) fn http_default_schema(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<HttpDefault>()
}

pub(super) fn mcp_rule_schema(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<McpRule>()
}

pub(super) fn task_rule_schema(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<TaskRule>()
}
