//! The JSON Schema of an MCP provider's `auth` (and its `ask`). The plan keeps it as the
//! JSON the person wrote, and the providers' own parser
//! (`OAuthConfig::from_json`) checks it at `engine check`, with the exact
//! place of an error; the types below exist for the shipped schema alone.

#![allow(dead_code)] // shapes for the schema, never built

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;

/// The shape of an MCP provider's `auth`, for the shipped schema.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct AuthSpec {
    oauth: OAuthSpec,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct OAuthSpec {
    /// A client registered beforehand. Default: registered at login (RFC 7591).
    client_id: Option<String>,
    /// Where the pre-registered client's secret is kept (never the secret
    /// itself): read by `engine login`, kept beside the tokens. Default: a
    /// public client (PKCE alone).
    client_secret: Option<SecretSpec>,
    /// The scopes to ask for. Default: what the server asks for.
    scopes: Option<Vec<String>>,
}

/// Where a client secret is kept.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum SecretSpec {
    /// An environment variable of `engine login`, by name.
    Env(String),
    /// A file (relative to the workspace); its first line.
    File(String),
}

pub(super) fn auth_schema(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<AuthSpec>()
}

/// The shape of an MCP provider's `ask`, for the shipped schema
/// (`McpProvider::from_config` checks it).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
struct AskSpec {
    /// How long a question the server puts during a call waits for a
    /// person's answer, in seconds (within the task's deadline); 0: none.
    #[schemars(range(min = 0, max = 3600))]
    wait_seconds: u64,
}

pub(super) fn ask_schema(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<AskSpec>()
}
