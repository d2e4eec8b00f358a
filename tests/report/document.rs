//! `engine report --json`: the document of the money demo and of the mixed
//! plan, read against the ledger's own records; the same ledger gives the
//! same bytes.

use serde_json::{json, Value};

use super::scenario::{self, MIXED_STATES};

fn task<'a>(doc: &'a Value, task_ref: &str) -> &'a Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["ref"] == task_ref)
        .unwrap_or_else(|| panic!("no task {task_ref}"))
}

#[test]
fn the_money_demo_report_holds_the_failure_the_claims_and_the_repair() {
    let ws = scenario::money();
    let doc = ws.json(&["report", "--no-timestamp"], 0);
    assert_eq!(doc["format"], "engine-report/1");
    assert_eq!(doc["generated_at"], Value::Null);
    assert_eq!(doc["goal"]["id"], "money-totals");
    // Its constraint protects the tests, so the engine checked it: `satisfied`.
    assert_eq!(doc["goal"]["state"], "satisfied");
    assert_eq!(
        doc["goal"]["claims"],
        "every task succeeded or was reused, every acceptance check passed, no unknown outcome left"
    );
    assert_eq!(doc["goal"]["acceptance"][0]["result"], "passed");
    assert_eq!(doc["goal"]["constraints"][0]["checked_by_engine"], true);
    assert_eq!(doc["waiting"], json!([]));
    let t2 = task(&doc, "T2");
    assert_eq!(t2["state"], "succeeded");
    let attempts = t2["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    let (first, repair) = (&attempts[0], &attempts[1]);
    assert_eq!((first["state"].as_str(), repair["kind"].as_str()), (Some("failed"), Some("repair")));
    assert_eq!(first["classification"]["class"], "validation_failed");
    assert_eq!(first["classification"]["rule"], "validation_check_failed");
    // The evidence the classification names is in the attempt's evidence.
    let cited = first["classification"]["evidence_ids"][0].as_i64().unwrap();
    let ev = first["evidence"].as_array().unwrap().iter().find(|e| e["id"] == cited).expect("cited evidence");
    assert_eq!(
        (ev["evidence"]["kind"].as_str(), ev["evidence"]["passed"].as_bool()),
        (Some("check_result"), Some(false))
    );
    assert_eq!(first["claims"][0]["authority"], "external_ai_message");
    assert_eq!(first["claims"][0]["verified"], false);
    // Times are the ledger's: intent ≤ dispatch ≤ receipt ≤ finish.
    for a in attempts {
        let t: Vec<i64> = ["intent_at_ms", "dispatched_at_ms", "receipt_at_ms", "finished_at_ms"]
            .iter()
            .map(|k| a[k].as_i64().unwrap_or_else(|| panic!("{k} missing")))
            .collect();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    }
    let tl = &doc["timeline"];
    assert_eq!(tl["max_parallel"], 1, "T1 then T2: one at a time");
    assert_eq!(tl["acceptance"][0]["passed"], true);
    assert_eq!(doc["budgets"]["provider_calls"], json!({"used": 3, "limit": 100}));
    assert_eq!(doc["budgets"]["attempts_per_task"]["used"], 2);
    assert_eq!(doc["revision"]["runs"].as_array().unwrap().len(), 2, "the run and the repair's run");
}

#[test]
fn the_mixed_report_names_every_state_what_waits_and_who_approved() {
    let m = scenario::mixed();
    let doc = m.ws.engine_json(&["report", "--no-timestamp"]).expect(0, None).json();
    let states: Vec<(String, String)> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["ref"].as_str().unwrap().to_string(), t["state"].as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(String, String)> = MIXED_STATES.iter().map(|(r, s)| (r.to_string(), s.to_string())).collect();
    assert_eq!(states, want);
    assert_eq!(doc["revision"]["number"], 2);
    assert_eq!(doc["goal"]["state"], "needs_settlement");
    assert!(doc["goal"]["claims"].as_str().unwrap().contains("a person must settle"));
    assert_eq!(doc["goal"]["acceptance"][1]["result"], "no_check");

    let build = task(&doc, "build");
    assert_eq!(build["reuse"]["decision"], "reuse");
    assert_eq!(build["reuse"]["provenance"]["revision"], 1);
    let lint = task(&doc, "lint");
    assert_eq!(lint["class"], "provider_rejected");
    assert_eq!(lint["reuse"]["reason"], "NO_PRIOR_COMPLETION", "it failed in revision 1");
    let excerpt = lint["attempts"].as_array().unwrap().last().unwrap()["evidence"][0]["evidence"]["stdout"]["excerpt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(excerpt.contains("<script>") && excerpt.contains("\u{1b}]0;owned-title\u{7}"), "{excerpt:?}");
    assert_eq!(task(&doc, "publish")["reuse"]["reason"], "EXTERNAL_EFFECT");
    assert!(task(&doc, "notify")["why"].as_str().unwrap().contains("send-invoice"));

    // The approval of revision 1, by alice, used by publish's call.
    let publish = task(&doc, "publish");
    let approval = &publish["approvals"][0];
    assert_eq!(
        (approval["actor"].as_str(), approval["note"].as_str()),
        (Some("alice"), Some("release notes <b>checked</b>"))
    );
    let used = publish["attempts"].as_array().unwrap().iter().find(|a| a["revision"] == 1).expect("publish ran in r1");
    assert_eq!(approval["consumed_by"], used["id"]);

    // What waits on a person, with the real operation ids.
    let send_op = m.ws.op_of("send-invoice");
    let publish_op = task(&doc, "publish")["operation_id"].as_str().unwrap().to_string();
    let waiting = doc["waiting"].as_array().unwrap();
    let kinds: Vec<&str> = waiting.iter().map(|w| w["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["settle", "approve", "failed"]);
    assert_eq!(waiting[0]["operation_id"], send_op.as_str());
    assert_eq!(waiting[0]["commands"][0], format!("engine settle {send_op} --outcome ok --note \"…\""));
    assert_eq!(waiting[0]["commands"][1], format!("engine settle {send_op} --outcome not_run --note \"…\""));
    assert_eq!(waiting[1]["commands"][0], format!("engine approve {publish_op} --note \"…\""));
    assert_eq!(waiting[2]["commands"][0], "engine revise plan.json --reason \"…\"");
    assert_eq!(m.rcv.tries_of(&send_op), vec![1], "the report itself sends nothing");
}

#[test]
fn an_earlier_revision_is_reported_as_it_was_and_a_missing_one_is_refused() {
    let m = scenario::mixed();
    let doc = m.ws.engine_json(&["report", "--revision", "1", "--no-timestamp"]).expect(0, None).json();
    assert_eq!((doc["revision"]["number"].as_i64(), doc["revision"]["active"].as_bool()), (Some(1), Some(false)));
    assert_eq!(task(&doc, "build")["state"], "succeeded");
    assert_eq!(task(&doc, "publish")["state"], "succeeded");
    assert_eq!(task(&doc, "build")["reuse"], Value::Null);
    // Only the goal-wide unknown waits; approvals and failures are the active revision's.
    let kinds: Vec<&str> = doc["waiting"].as_array().unwrap().iter().map(|w| w["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["settle"]);
    let refused = m.ws.engine_json(&["report", "--revision", "3"]);
    refused.expect(2, Some("USAGE_ERROR"));
    assert!(refused.stderr.contains("revisions 1 to 2"), "{}", refused.describe());
    // Neither --html nor --json: say which.
    let out = m.ws.command(&["report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--html FILE"));
}

#[test]
fn the_same_ledger_gives_the_same_bytes() {
    let m = scenario::mixed();
    let dir = &m.ws.dir;
    let report = |args: &[&str], env: Option<&str>| {
        let mut cmd = m.ws.command(&["report"]);
        cmd.current_dir(dir).args(args).env_remove("SOURCE_DATE_EPOCH");
        if let Some(e) = env {
            cmd.env("SOURCE_DATE_EPOCH", e);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    report(&["--html", "a.html", "--no-timestamp"], None);
    report(&["--html", "b.html", "--no-timestamp"], None);
    let (a, b) = (std::fs::read(dir.join("a.html")).unwrap(), std::fs::read(dir.join("b.html")).unwrap());
    assert!(a == b, "two reports of the same ledger differ");
    assert_eq!(report(&["--json", "--no-timestamp"], None), report(&["--json", "--no-timestamp"], None));
    // SOURCE_DATE_EPOCH sets the time printed, and only that differs.
    report(&["--html", "c.html"], Some("1700000000"));
    let c = std::fs::read_to_string(dir.join("c.html")).unwrap();
    assert!(c.contains("generated at 2023-11-14T22:13:20Z"), "no fixed generation time");
    let doc: Value = serde_json::from_slice(&report(&["--json"], Some("1700000000"))).unwrap();
    assert_eq!(doc["generated_at"], "2023-11-14T22:13:20Z");
    // A plain report has a time of its own.
    let now: Value = serde_json::from_slice(&report(&["--json"], None)).unwrap();
    assert!(now["generated_at"].as_str().is_some_and(|t| t.ends_with('Z')));
}
