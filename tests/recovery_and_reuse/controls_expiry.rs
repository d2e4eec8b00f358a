//! Issue 42: approvals that expire (`engine approve … --for DURATION`, the
//! plan's `approvals.expire_after`): past its time an approval is
//! `expired` — shown so, never spent — and the task waits for a new one.
//! Real time, short durations (the shipped binary's clock is the system's).

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

/// A task that always asks a person first; the run's operation waiting.
fn waiting(ws: &Ws, approvals: Option<Value>) -> String {
    let mut t = sh_task("T1", "true");
    t["requires_approval"] = json!(true);
    let mut p = plan("expiry", vec![t]);
    if let Some(a) = approvals {
        p["approvals"] = a;
    }
    ws.write_plan("plan.json", &p);
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    out.json()["awaiting_approval"][0]["operation_id"].as_str().unwrap().to_string()
}

#[test]
fn an_approval_past_its_time_is_expired_and_never_spent() {
    let ws = Ws::new();
    let op = waiting(&ws, None);
    let given = ws.json(&["approve", &op, "--note", "for a moment", "--for", "2s"], 0);
    assert!(given["approval"]["expires_at_ms"].is_i64(), "{given:#}");
    std::thread::sleep(Duration::from_millis(2_500));

    // Past its time: the run waits again, nothing was sent.
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(4, Some("APPROVAL_REQUIRED"));
    assert_eq!(ws.calls("T1"), 0, "an expired approval pays for no call");
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("expired at"), "{}", status.stdout);
    let acts = ws.json(&["status"], 0)["acts"].clone();
    assert!(acts.to_string().contains("\"expired\":true"), "{acts:#}");

    // A new approval, for ten minutes: status warns before it ends.
    ws.json(&["approve", &op, "--note", "now, for ten minutes", "--for", "10m"], 0);
    let status = ws.engine(&["status"]);
    assert!(status.stdout.contains("expires in 10 min"), "{}", status.stdout);
    ws.json(&["run", "plan.json"], 0);
    assert_eq!(ws.calls("T1"), 1);
    let approvals = ws.ledger().approvals();
    assert_eq!(approvals.len(), 2);
    assert_eq!((approvals[0].consumed_by, approvals[1].consumed_by.is_some()), (None, true), "{approvals:?}");
    // verify checks that no expired approval was spent.
    ws.engine(&["verify"]).expect_code(0);
}

#[test]
fn the_plans_expire_after_is_the_default_and_bad_durations_are_refused() {
    let ws = Ws::new();
    let op = waiting(&ws, Some(json!({"expire_after": "90s"})));
    ws.json(&["approve", &op, "--note", "the plan's default"], 0);
    let a = ws.ledger().approvals().pop().unwrap();
    // Its end is 90 s from when it was given (the row's time is stamped a
    // moment after the end is computed).
    let lasts = a.expires_at_ms.map(|e| e - a.at_ms).unwrap_or_default();
    assert!((89_000..=90_000).contains(&lasts), "{a:?}");
    // `--for` wins over the plan's default.
    let out = ws.engine_json(&["approve", &op, "--note", "x", "--for", "soon"]);
    out.expect(2, Some("USAGE_ERROR"));
    assert!(out.describe().contains("--for"), "{}", out.describe());

    let ws = Ws::new();
    let mut p = plan("bad", vec![sh_task("T1", "true")]);
    p["approvals"] = json!({"expire_after": "forever"});
    ws.write_plan("plan.json", &p);
    let out = ws.engine_json(&["check", "plan.json"]);
    out.expect(2, Some("PLAN_INVALID"));
    assert!(out.describe().contains("$.approvals.expire_after"), "{}", out.describe());
}
