//! Issue 9, defect 2: a restart that finds an in-doubt attempt's effect
//! present by observation must judge it exactly once. The attempt used to
//! be validated twice (once as the observation's receipt, again by the pass
//! over receipts not yet judged), and the second result panicked the
//! engine (exit 101) after its dependent had already run.

use serde_json::json;

use crate::common::*;

#[test]
fn observed_present_attempt_is_validated_once_and_its_dependent_runs() {
    let rcv = Receiver::start(&["--observe"]);
    let ws = Ws::new();
    let mut t2 = http_task("T2", "external");
    t2["depends_on"] = json!(["T1"]);
    ws.write_plan(
        "plan.json",
        &plan("docs", json!({"r": http_provider(&rcv, true)}), vec![http_task("T1", "external"), t2]),
    );
    let (op1, op2) = (ws.digest_op("T1"), ws.digest_op("T2"));

    let first = ws.run_fp("after_dispatch");
    assert!(first.killed(), "{}", first.describe());
    assert_eq!(rcv.wait_deliveries(&op1, 1).len(), 1);

    let second = ws.run();
    second.expect(0, None);
    assert_eq!(ws.goal_state(), "satisfied");
    // T1: its one try, judged once from the observation; T2: sent once.
    let t1 = ws.attempts_of("T1");
    assert_eq!(t1.len(), 1, "{t1:?}");
    assert_eq!(t1[0].state, "succeeded");
    let judged = ws.ledger().check_results().iter().filter(|c| c.attempt_id.map(|a| a.get()) == Some(t1[0].id)).count();
    assert_eq!(judged, 1, "T1's validation V1 judged exactly once");
    assert_eq!(ws.attempts_of("T2").len(), 1);
    assert_eq!((rcv.tries_of(&op1), rcv.tries_of(&op2)), (vec![1], vec![1]));

    // A third run has nothing left to do and still ends satisfied.
    ws.run().expect(0, None);
    assert_eq!((rcv.tries_of(&op1), rcv.tries_of(&op2)), (vec![1], vec![1]));
}
