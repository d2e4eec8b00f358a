//! The committed JSON Schema of the plan file must be what the code
//! generates now (issue 2: "a test fails if the committed schema is stale").

use super::common::*;

const REGENERATE: &str = "regenerate it with: cargo run -q -p engine -- schema > engine/plan.schema.json";

fn committed() -> String {
    let path = crate::support::repo_root().join("engine/plan.schema.json");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}; {REGENERATE}", path.display()))
}

#[test]
fn committed_plan_schema_is_current() {
    let want = format!("{}\n", serde_json::to_string_pretty(&engine::plan::schema()).unwrap());
    assert!(
        committed() == want,
        "engine/plan.schema.json is stale (it differs from engine::plan::schema()); {REGENERATE}"
    );
}

#[test]
fn engine_schema_prints_the_committed_schema() {
    let ws = Ws::new();
    let out = ws.engine(&["schema"]);
    out.expect_code(0);
    assert!(out.stdout == committed(), "`engine schema` differs from engine/plan.schema.json; {REGENERATE}");
    // And the schema describes the plan file it claims to.
    let schema = out.json();
    assert_eq!(schema["title"], "engine plan file");
    for field in ["version", "goal", "budgets", "providers", "tasks"] {
        assert!(schema["properties"].get(field).is_some(), "schema lacks `{field}`");
    }
    assert_eq!(schema["additionalProperties"], false, "unknown fields are errors, and the schema says so");
}
