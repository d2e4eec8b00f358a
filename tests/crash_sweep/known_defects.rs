//! The exact cases of the defects of issue 9 this harness found, each a
//! plain test that is ignored until its fix (on another branch) is merged:
//! then delete the `#[ignore]` and the defect's entry in
//! `tests/support/known.rs`.

use std::time::Duration;

use crate::common::Receiver;
use crate::support::checks;
use crate::support::kill::{self, Kill};
use crate::support::person::{Ending, Session};
use crate::support::reference::Instance;

/// Defect 2: an HTTP task with observation and a validation, a second
/// external task after it; killed right after the first dispatch, the
/// restart observes the effect present and panicked ("validated attempts
/// are in flight", exit 101) where it should validate once and go on.
#[test]
#[ignore = "defect 2 of issue 9: panic on restart after an observed dispatch (fix on the runtime branch)"]
fn restart_after_an_observed_dispatch_validates_once() {
    let rcv = Receiver::start(&["--observe"]);
    let inst = Instance::new("http-observe", &rcv, "defect2");
    let first = inst.ws.run_fp("after_dispatch");
    assert!(first.killed(), "{}", first.describe());
    let mut s = Session::new(&inst, &rcv, 1, |_| Kill::Never);
    let ending = s.run_to_end();
    checks::after_session(&mut s, &ending);
    assert_eq!(ending, Ending::Satisfied, "{}", s.transcript());
    assert!(s.findings.is_empty(), "{}\n{}", s.findings.join("\n"), s.transcript());
}

/// Defect 3: a SIGKILL in the first milliseconds of the first run (while
/// the store is being created) can leave a store every later run refuses
/// with exit 70 ("attempt to write a readonly database"). Found by the
/// soak in about 3% of its sessions; here up to 150 tries of a kill at
/// 0–20 ms, each followed by a plain run that must not exit 70.
#[test]
#[ignore = "defect 3 of issue 9: a killed store creation leaves a store every run refuses (fix on the store branch)"]
fn a_run_killed_while_creating_the_store_leaves_one_the_next_run_opens() {
    let rcv = Receiver::start(&[]);
    for i in 0..150u64 {
        let inst = Instance::new("command", &rcv, &format!("create{i}"));
        let killed =
            kill::run(&inst.ws, &["run", "plan.json", "--jobs", "1"], Kill::After(Duration::from_millis(i % 21)));
        let next = kill::run(&inst.ws, &["run", "plan.json", "--jobs", "1"], Kill::Never);
        assert_ne!(
            next.out.exit(),
            Some(70),
            "try {i}: killed after {} ms (exit {:?}), the next run:\n{}",
            i % 21,
            killed.out.exit(),
            next.out.describe()
        );
    }
}
