//! Fencing: a writer whose lease was taken over writes nothing more
//! (STALE_GENERATION). Staged by bumping the lease generation in the store
//! while engine A waits for a delayed answer — what a takeover by another
//! engine would leave behind.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

#[test]
fn a_superseded_writer_gets_stale_generation_and_writes_no_receipt() {
    let rcv = Receiver::start(&[]);
    let ws = one_http_task(&rcv, "external", false, json!({}));
    let op = ws.digest_op("T1");
    rcv.control(json!({"mode": "delay", "delay_seconds": 3, "times": 1}));

    let mut engine_a = ws.spawn_run();
    rcv.wait_deliveries(&op, 1);
    let attempt = wait_until(Duration::from_secs(5), "the attempt to be dispatched", || {
        ws.attempts().into_iter().find(|a| a.state == "dispatched")
    });
    // Take the lease over: a new generation, held by a live process (ours).
    let me = std::process::id();
    assert_eq!(
        ws.tamper(&format!("UPDATE lease SET generation = generation + 1, pid = {me}, proc_start = NULL WHERE id = 1")),
        1
    );
    let generation = ws.ledger().lease().generation;
    assert_eq!(generation, attempt.generation + 1);
    let before = ws.ledger().snapshot();

    // The answer arrives after the takeover: A must not record it.
    let out = engine_a.wait(RUN_DEADLINE);
    out.expect(70, Some("STALE_GENERATION"));
    assert!(out.stderr.contains("STALE_GENERATION"), "{}", out.describe());
    assert_eq!(ws.receipt_of(attempt.id), None, "no receipt written by the superseded writer");
    assert_eq!(ws.ledger().snapshot(), before, "the superseded writer wrote nothing at all");
    assert_eq!(ws.attempts()[0].state, "dispatched");
    let lease = ws.ledger().lease();
    let (g, pid) = (lease.generation, lease.pid.unwrap_or_default());
    assert_eq!((g, pid), (generation, me as i64), "A did not release (or touch) the lease it no longer holds");
    assert_eq!(rcv.tries_of(&op), vec![1]);
}
