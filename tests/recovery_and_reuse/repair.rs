//! `engine repair`: repetition refused, provider switches refused, and
//! failures a repair is not expected to fix need a person's forced note.

use serde_json::json;

use crate::helpers::*;

/// One task whose validation always fails the same way.
fn always_failing() -> Ws {
    let ws = Ws::new();
    ws.write("in.txt", "one\n");
    let mut p = plan("repeat", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "inputs", json!(["in.txt"]));
    set(&mut p, "T1", "validations", json!([validation("V1", "echo 'AssertionError: 1 != 2' >&2; exit 1")]));
    ws.write_plan("plan.json", &p);
    ws
}

fn refused_as(ws: &Ws, args: &[&str], code: &str) -> serde_json::Value {
    let doc = ws.json(args, 2);
    assert_eq!(doc["ok"], json!(false));
    assert_eq!(doc["error"]["code"], code, "{doc:#}");
    doc
}

#[test]
fn repeated_identical_failure_is_refused_until_inputs_or_instruction_change() {
    let ws = always_failing();
    ws.json(&["run", "plan.json"], 1);
    assert_eq!(ws.attempts_of("T1")[0].class(), "validation_failed");

    // One repair is allowed: there is only one failure so far.
    ws.json(&["repair", "T1"], 1);
    assert_eq!(ws.calls("T1"), 2);

    // Two identical failures in a row, nothing new: refused, nothing sent.
    let doc = refused_as(&ws, &["repair", "T1"], "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE");
    let ids: Vec<i64> = ws.attempts_of("T1").iter().map(|a| a.id).collect();
    assert_eq!(doc["error"]["details"]["attempts"], json!([ids[1], ids[0]]));
    assert_eq!(ws.calls("T1"), 2);
    assert_eq!(ws.attempts_of("T1").len(), 2);
    assert_eq!(ws.events_of("repair_requested").len(), 1, "a refused repair records no request");

    // A changed input file is new evidence: the repair goes through.
    ws.write("in.txt", "two\n");
    ws.json(&["repair", "T1"], 1);
    assert_eq!(ws.calls("T1"), 3);
    // ... once: the same failure on the same new inputs is refused again.
    refused_as(&ws, &["repair", "T1"], "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE");
    assert_eq!(ws.calls("T1"), 3);

    // A new instruction is new too; repeating that instruction is not.
    ws.json(&["repair", "T1", "--instruction", "V1 compares against 2; make it 2"], 1);
    assert_eq!(ws.calls("T1"), 4);
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!((last.kind.as_str(), last.instruction.as_deref()), ("repair", Some("V1 compares against 2; make it 2")));
    refused_as(
        &ws,
        &["repair", "T1", "--instruction", "V1 compares against 2; make it 2"],
        "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE",
    );
    assert_eq!(ws.calls("T1"), 4);
    ws.json(&["repair", "T1", "--instruction", "something else"], 1);
    assert_eq!(ws.calls("T1"), 5);
}

/// An agent whose report names its model (issue 43 records it in the
/// failed attempt's checkpoint): the same failure twice on the same
/// model and inputs is still a repetition, refused; a new pin is new.
#[test]
fn an_agent_naming_its_model_is_refused_a_repeated_identical_failure() {
    let ws = Ws::new();
    ws.write("in.txt", "one\n");
    ws.write("agent.sh", "echo A1 >> \"$SIDE/calls.log\"\necho '{\"status\": \"done\", \"model\": \"m-1\"}'\n");
    let task = json!({
        "ref": "A1", "title": "an agent", "provider": "agent", "action": {"run": ["sh", "agent.sh"]},
        "effect": "local", "inputs": ["in.txt"], "depends_on": [],
        "validations": [validation("V1", "echo 'AssertionError: 1 != 2' >&2; exit 1")],
    });
    ws.write_plan("plan.json", &plan("model-repeat", vec![task]));
    ws.json(&["run", "plan.json"], 1);
    ws.json(&["repair", "A1"], 1);
    assert_eq!(ws.calls("A1"), 2);
    refused_as(&ws, &["repair", "A1"], "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE");
    assert_eq!(ws.calls("A1"), 2, "nothing sent");
}

#[test]
fn another_provider_needs_a_revision() {
    let ws = always_failing();
    ws.json(&["run", "plan.json"], 1);
    let doc = refused_as(&ws, &["repair", "T1", "--provider", "agent"], "PROVIDER_CHANGE_REQUIRES_REVISION");
    assert!(doc["error"]["message"].as_str().unwrap().contains("revise"));
    assert_eq!(ws.calls("T1"), 1);
    assert_eq!(ws.attempts_of("T1").len(), 1);
    // Naming the plan's own provider is fine.
    ws.json(&["repair", "T1", "--provider", "sh"], 1);
    assert_eq!(ws.calls("T1"), 2);
}

#[test]
fn provider_rejected_and_unclassified_failures_need_force_with_a_note() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let p =
        plan("forced", vec![sh_task("T1", "echo 'usage: bad flag' >&2; exit 3"), agent_task("T2", "failed-network")]);
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 1);
    assert_eq!(
        (ws.attempts_of("T1")[0].class(), ws.attempts_of("T1")[0].rule()),
        ("provider_rejected", "action_exit_nonzero")
    );
    assert_eq!(ws.attempts_of("T2")[0].class(), "unclassified");

    for r in ["T1", "T2"] {
        let doc = refused_as(&ws, &["repair", r], "USAGE_ERROR");
        assert!(doc["error"]["message"].as_str().unwrap().contains("--force --note"), "{doc:#}");
        // --force without a note is a usage error too.
        assert_eq!(ws.engine(&["repair", r, "--force"]).code(), 2);
        // An empty note is not a note.
        assert_eq!(ws.engine(&["repair", r, "--force", "--note", "  "]).code(), 2);
        assert_eq!(ws.calls(r), 1, "{r}: nothing dispatched without a forced note");
    }

    ws.json(&["repair", "T1", "--force", "--note", "the flag was renamed upstream; retrying once"], 1);
    assert_eq!(ws.calls("T1"), 2);
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!(last.kind, "repair");
    let requested = ws.events_of("repair_requested");
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0].0.as_deref(), Some("T1"));
    assert_eq!(requested[0].2["forced"], "the flag was renamed upstream; retrying once");
    assert_eq!(requested[0].2["class"], "provider_rejected");
}

/// A repair of paid work is a repeat: it waits on a person's approval of
/// exactly its request. With an instruction that request is a new
/// operation, and the approval the engine asks for must be possible.
#[test]
fn a_repair_with_an_instruction_of_paid_work_can_be_approved_and_consumes_the_approval() {
    let ws = Ws::new();
    let mut p = plan("paid-repair", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "cost", json!(1.0));
    set(&mut p, "T1", "validations", json!([validation("V1", "exit 1")]));
    p["budgets"]["max_cost"] = json!(10);
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json"], 1);

    let waiting = ws.json(&["repair", "T1", "--instruction", "use cents"], 4);
    assert_eq!(waiting["code"], "APPROVAL_REQUIRED");
    let op = waiting["awaiting_approval"][0]["operation_id"].as_str().unwrap().to_string();
    assert_ne!(op, ws.attempts_of("T1")[0].operation_id, "the instruction is part of the request");
    assert_eq!(ws.calls("T1"), 1);

    let approved = ws.json(&["approve", &op, "--note", "one more paid try"], 0);
    assert_eq!(approved["approval"]["task_ref"], "T1");
    ws.json(&["repair", "T1", "--instruction", "use cents"], 1);
    assert_eq!(ws.calls("T1"), 2);
    let last = ws.attempts_of("T1").pop().unwrap();
    assert_eq!((last.kind.as_str(), last.operation_id.as_str()), ("repair", op.as_str()));
    assert_eq!(ws.ledger().approvals().iter().filter(|a| a.consumed_by.map(|c| c.get()) == Some(last.id)).count(), 1);
}

/// Agents say something different every time; that is not new evidence
/// about the failure. A different failure is.
#[test]
fn repetition_is_judged_on_the_failure_evidence_not_on_agent_chatter() {
    let ws = Ws::new();
    ws.write("agent.py", AGENT_PY);
    let mut p = plan("chatter", vec![agent_task("SAME", "done"), agent_task("DIFFERENT", "done")]);
    set(&mut p, "SAME", "validations", json!([validation("V1", "echo 'AssertionError: 4.35 != 435' >&2; exit 1")]));
    // This validation's failure differs on every attempt.
    set(
        &mut p,
        "DIFFERENT",
        "validations",
        json!([validation("V1", "echo \"AssertionError: $(wc -l < \"$SIDE/calls.log\") != 0\" >&2; exit 1")]),
    );
    ws.write_plan("plan.json", &p);
    ws.json(&["run", "plan.json", "--jobs", "1"], 1);
    ws.json(&["repair", "SAME"], 1);
    ws.json(&["repair", "DIFFERENT"], 1);
    // The agent's stdout differed between its two tries ...
    let same = ws.attempts_of("SAME");
    let outs: Vec<String> = same
        .iter()
        .map(|a| {
            ws.evidence(a.id).into_iter().find(|(_, k, _)| k == "process_exit").unwrap().2["stdout"]["excerpt"]
                .to_string()
        })
        .collect();
    assert_ne!(outs[0], outs[1]);
    // ... but the failure did not: refused.
    refused_as(&ws, &["repair", "SAME"], "REPEATED_FAILURE_WITHOUT_NEW_EVIDENCE");
    assert_eq!(ws.calls("SAME"), 2);
    // A failure that changed is new evidence: allowed.
    ws.json(&["repair", "DIFFERENT"], 1);
    assert_eq!(ws.calls("DIFFERENT"), 3);
}

/// An operation a repair replaced is history: `engine retry` of it is
/// refused once the task's latest call is another operation, and nothing is
/// sent.
#[test]
fn retry_of_an_operation_a_repair_replaced_is_refused() {
    let ws = Ws::new();
    let mut p = plan("replaced", vec![sh_task("T1", "true")]);
    set(&mut p, "T1", "action", json!({"run": ["./tool.sh"]}));
    set(&mut p, "T1", "outputs", json!(["out.txt"]));
    ws.write_plan("plan.json", &p);
    let first = ws.json(&["run", "plan.json"], 1);
    assert_eq!(first["failed"], json!(["T1"]));
    let old_op = ws.attempts_of("T1")[0].operation_id.clone();
    ws.write("tool.sh", "#!/bin/sh\necho v1 > out.txt\n");
    std::fs::set_permissions(ws.path("tool.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    ws.json(&["repair", "T1", "--instruction", "the tool is there now"], 0);
    let before = ws.attempts_of("T1").len();
    let doc = ws.json(&["retry", &old_op], 2);
    assert!(doc["error"]["message"].as_str().unwrap().contains("nothing to retry"), "{doc:#}");
    assert_eq!(ws.attempts_of("T1").len(), before, "nothing sent");
}
