//! The crash matrix: every failpoint × effect × observation, each run killed
//! (SIGKILL) at the point and then restarted with a plain `engine run`.
//!
//! What each failpoint leaves in the store, and so what the restart must do:
//!
//! - `after_intent`: the intent is committed, nothing was sent (the provider
//!   call was never started). The attempt is `intent_recorded`, which only
//!   claims the decision, so the engine cannot tell "not sent" from "sent,
//!   not yet marked": in doubt.
//! - `after_dispatch`: the request was written (the receiver logged it) and
//!   `dispatched` committed; no receipt: in doubt.
//! - `after_receipt`: the answer arrived but was not committed: the store
//!   is exactly as after `after_dispatch`, so the same expectations.
//! - `after_receipt_commit`: the receipt is committed, validations never
//!   ran: not in doubt. The restart judges the committed receipt (runs the
//!   validations) and sends nothing, whatever the effect.
//!
//! For an in-doubt attempt (SPEC "Store, locks, generations" and issue 3
//! item 4), observation is tried first where the provider can observe
//! ("used before anything is re-sent"): present → the observation is the
//! receipt and the task goes on to its validations; absent → the attempt
//! fails as retryable (`provider_unavailable`, rule
//! `observed_effect_absent`), except that an effect-`none` task is simply
//! re-run; no observation → re-run where the effect is `none`, otherwise
//! `effect_unknown`, exit 3, listed in `unknown` with `engine_restarted`.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::json;

use crate::common::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// The committed receipt is judged: try 1 succeeds, nothing re-sent.
    Validated,
    /// Observation found the effect: try 1 succeeds from it.
    ObservedPresent,
    /// Observation found no effect: try 1 failed, retryable; nothing sent.
    ObservedAbsent,
    /// Effect `none`: try 1 abandoned, try 2 sent and succeeds.
    Rerun,
    /// Nobody can tell: try 1 `effect_unknown`, exit 3.
    Unknown,
}
use Expect::*;

struct Case {
    failpoint: &'static str,
    effect: &'static str,
    observe: bool,
    expect: Expect,
    /// Deliveries of the operation in the receiver's log once the restart
    /// is done (Rerun of an already-delivered `none` is the one repeat
    /// allowed without a person).
    deliveries: usize,
}

const fn case(failpoint: &'static str, effect: &'static str, observe: bool, expect: Expect, deliveries: usize) -> Case {
    Case { failpoint, effect, observe, expect, deliveries }
}

const MATRIX: &[Case] = &[
    // after_intent: nothing reached the receiver.
    case("after_intent", "none", false, Rerun, 1),
    case("after_intent", "none", true, Rerun, 1),
    case("after_intent", "local", false, Unknown, 0),
    case("after_intent", "local", true, ObservedAbsent, 0),
    case("after_intent", "external", false, Unknown, 0),
    case("after_intent", "external", true, ObservedAbsent, 0),
    // after_dispatch: delivered once, no receipt.
    case("after_dispatch", "none", false, Rerun, 2),
    case("after_dispatch", "none", true, ObservedPresent, 1),
    case("after_dispatch", "local", false, Unknown, 1),
    case("after_dispatch", "local", true, ObservedPresent, 1),
    case("after_dispatch", "external", false, Unknown, 1),
    case("after_dispatch", "external", true, ObservedPresent, 1),
    // after_receipt: the answer was never committed — same as after_dispatch.
    case("after_receipt", "none", false, Rerun, 2),
    case("after_receipt", "none", true, ObservedPresent, 1),
    case("after_receipt", "local", false, Unknown, 1),
    case("after_receipt", "local", true, ObservedPresent, 1),
    case("after_receipt", "external", false, Unknown, 1),
    case("after_receipt", "external", true, ObservedPresent, 1),
    // after_receipt_commit: the receipt is in the store; only validations remain.
    case("after_receipt_commit", "none", false, Validated, 1),
    case("after_receipt_commit", "none", true, Validated, 1),
    case("after_receipt_commit", "local", false, Validated, 1),
    case("after_receipt_commit", "local", true, Validated, 1),
    case("after_receipt_commit", "external", false, Validated, 1),
    case("after_receipt_commit", "external", true, Validated, 1),
];

#[test]
fn crash_matrix() {
    // A few cases at a time: each is its own receiver, workspace and store.
    let started = Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let mut failures = Vec::new();
        for chunk in MATRIX.chunks(4) {
            let handles: Vec<_> = chunk
                .iter()
                .map(|c| {
                    let name = format!(
                        "{} × {} × {}",
                        c.failpoint,
                        c.effect,
                        if c.observe { "observe" } else { "no observe" }
                    );
                    (name.clone(), std::thread::Builder::new().name(name).spawn_scoped(s, move || run_case(c)).unwrap())
                })
                .collect();
            for (name, h) in handles {
                if let Err(panic) = h.join() {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures.push(format!("[{name}] {msg}"));
                }
            }
        }
        failures
    });
    eprintln!("crash matrix: {} cases in {:?}", MATRIX.len(), started.elapsed());
    assert!(
        failures.is_empty(),
        "{} of {} matrix cases failed:\n{}",
        failures.len(),
        MATRIX.len(),
        failures.join("\n\n")
    );
}

fn run_case(c: &Case) {
    let rcv = Receiver::start(if c.observe { &["--observe"] } else { &[] });
    let ws = one_http_task(&rcv, c.effect, c.observe, json!({}));

    // 1. Run to the failpoint: the engine kills itself.
    let first = ws.run_fp(c.failpoint);
    assert!(first.killed(), "expected SIGKILL (137) at {}\n{}", c.failpoint, first.describe());
    assert!(first.stderr.contains(&format!("failpoint {}", c.failpoint)), "{}", first.describe());

    let before = ws.attempts();
    assert_eq!(before.len(), 1, "one intent before the kill: {before:?}");
    let a1 = before[0].clone();
    let op = a1.operation_id.clone();
    assert_eq!((a1.task_ref.as_str(), a1.try_no), ("T1", 1));
    assert_eq!(op, ws.op_of("T1"));
    let state_at_kill = match c.failpoint {
        "after_intent" => "intent_recorded",
        "after_dispatch" | "after_receipt" => "dispatched",
        _ => "receipt_recorded",
    };
    assert_eq!(a1.state, state_at_kill, "state at the kill");
    assert_eq!(
        ws.receipt_of(a1.id).is_some(),
        c.failpoint == "after_receipt_commit",
        "receipt committed only at after_receipt_commit"
    );

    // What the receiver saw, from its own log.
    if c.failpoint == "after_intent" {
        assert!(rcv.deliveries_of(&op).is_empty(), "after_intent: nothing may be sent: {:?}", rcv.deliveries());
    } else {
        let d = rcv.wait_deliveries(&op, 1);
        assert_eq!(rcv.tries_of(&op), vec![1], "delivered once, try 1: {d:?}");
    }
    let events_at_kill = ws.events();
    let kinds_at_kill: Vec<&str> = events_at_kill.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds_at_kill.contains(&"intent_recorded"), "{kinds_at_kill:?}");

    // 2. Restart without the failpoint.
    let second = ws.run();
    let report = second.json();

    // Nothing recorded before the kill is lost: every event is still there,
    // unchanged and in order, and the attempt keeps its id and identity.
    let events_after = ws.events();
    assert!(events_after.len() > events_at_kill.len());
    assert_eq!(&events_after[..events_at_kill.len()], &events_at_kill[..], "events before the kill are intact");
    assert!(
        // (On a PostgreSQL store, ENGINE_TEST_STORE=postgres: the task's claim.)
        ws.event_kinds().iter().any(|k| k == "lease_taken_over" || k == "claim_taken_over"),
        "the dead holder's lease was taken over, and logged"
    );
    let after = ws.attempts();
    let a1_after = after.iter().find(|a| a.id == a1.id).expect("the first attempt keeps its id");
    assert_eq!(
        (&a1_after.operation_id, a1_after.try_no, &a1_after.request_digest, a1_after.intent_at_ms, a1_after.generation),
        (&a1.operation_id, a1.try_no, &a1.request_digest, a1.intent_at_ms, a1.generation),
        "the intent row is unchanged"
    );
    if c.failpoint == "after_receipt_commit" {
        assert!(ws.receipt_of(a1.id).is_some(), "the committed receipt survives");
    }

    // The receiver's log: no (key, try) twice, no repeat but an allowed re-run.
    let tries = rcv.tries_of(&op);
    let mut seen = HashMap::new();
    for t in &tries {
        *seen.entry(*t).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "a (key, try) delivered twice: {tries:?}");
    if c.effect != "none" {
        assert!(tries.len() <= 1, "an {} effect delivered twice without an approved retry: {tries:?}", c.effect);
    }
    assert_eq!(tries.len(), c.deliveries, "deliveries of {op}: {tries:?}\n{}", second.describe());

    let unknown = report["unknown"].as_array().expect("unknown is a list").clone();
    match c.expect {
        Validated | ObservedPresent => {
            second.expect(0, None);
            assert_eq!(report["goal_state"], "satisfied");
            assert_eq!(after.len(), 1, "nothing new was attempted: {after:?}");
            assert_eq!(a1_after.state, "succeeded");
            assert_eq!(ws.task_state("T1"), "succeeded");
            assert!(unknown.is_empty());
            let validated = ws.ledger().validations_passed(a1.id);
            assert_eq!(validated, 1, "the validation ran against this attempt");
            let receipt = ws.receipt_of(a1.id).expect("a receipt");
            if c.expect == ObservedPresent {
                assert_eq!(receipt["source"], "observation", "the observation is the receipt: {receipt}");
                assert_eq!(receipt["lost"], "engine_restarted");
                assert!(ws.event_kinds().iter().any(|k| k == "observed_effect_present"));
            } else {
                assert_eq!(receipt["http_status"], 200);
            }
        }
        ObservedAbsent => {
            second.expect(1, None);
            assert_eq!(after.len(), 1, "nothing new was attempted: {after:?}");
            assert_eq!(a1_after.state, "failed");
            assert_eq!(a1_after.class(), "provider_unavailable", "{a1_after:?}");
            assert_eq!(a1_after.classification.as_ref().unwrap()["rule"], "observed_effect_absent");
            assert_eq!(ws.task_state("T1"), "failed");
            assert_eq!(report["failed"], json!(["T1"]));
            assert!(unknown.is_empty());
            // Retryable: `engine retry` sends it as try 2. A retry of
            // external work needs a person's approval first, even though
            // no earlier try was dispatched; a local one does not.
            let op_s = op.as_str();
            if c.effect == "external" {
                ws.engine_json(&["retry", op_s, "--jobs", "1"]).expect(4, Some("APPROVAL_REQUIRED"));
                assert!(rcv.tries_of(&op).is_empty(), "nothing sent before the approval");
                ws.engine_json(&["approve", op_s, "--note", "observed absent; send it"]).expect(0, None);
            }
            let retry = ws.engine_json(&["retry", op_s, "--jobs", "1"]);
            retry.expect(0, None);
            assert_eq!(rcv.tries_of(&op), vec![2], "the retry is delivered once, as try 2");
        }
        Rerun => {
            second.expect(0, None);
            assert_eq!(after.len(), 2, "{after:?}");
            assert_eq!(a1_after.state, "abandoned");
            assert_eq!(a1_after.unknown_reason.as_deref(), Some("engine_restarted"));
            let a2 = &after[1];
            assert_eq!((a2.operation_id.as_str(), a2.try_no, a2.state.as_str()), (op.as_str(), 2, "succeeded"));
            assert_eq!(tries.last(), Some(&2), "the re-run is try 2: {tries:?}");
            assert!(ws.event_kinds().iter().any(|k| k == "rerun_after_restart"));
            assert!(unknown.is_empty());
        }
        Unknown => {
            second.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
            assert_eq!(report["goal_state"], "needs_settlement");
            assert_eq!(ws.goal_state(), "needs_settlement");
            assert_eq!(after.len(), 1, "never re-sent on its own: {after:?}");
            assert_eq!(a1_after.state, "effect_unknown");
            assert_eq!(a1_after.unknown_reason.as_deref(), Some("engine_restarted"));
            assert_eq!(ws.task_state("T1"), "effect_unknown");
            assert_eq!(unknown.len(), 1, "{unknown:?}");
            let u = &unknown[0];
            assert_eq!(u["operation_id"], op.as_str());
            assert_eq!(u["task_ref"], "T1");
            assert_eq!(u["request_digest"], a1.request_digest.as_str());
            assert_eq!(u["try_no"], 1);
            assert_eq!(u["reason"], "engine_restarted");
            // Issue 3: the stop prints each op's *last known state*.
            assert_eq!(u["last_state"], state_at_kill, "last known state of the unknown op: {u}");
            // A further run still refuses to guess, and still sends nothing.
            let third = ws.run();
            third.expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
            assert_eq!(third.json()["unknown"][0]["operation_id"], op.as_str());
            assert_eq!(rcv.tries_of(&op).len(), c.deliveries);
            assert_eq!(ws.attempts().len(), 1);
        }
    }
}
