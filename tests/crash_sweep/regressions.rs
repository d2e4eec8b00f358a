//! The exact cases the crash sweep and the soak found before their fixes,
//! kept as plain tests so each fails on its own if the defect comes back.

use crate::common::Receiver;
use crate::support::checks;
use crate::support::kill::Kill;
use crate::support::person::{Ending, Session};
use crate::support::reference::Instance;

/// Guards issue 9, defect 2: the restart panicked (exit 101) validating an observed attempt twice.
///
/// An HTTP task with observation and a validation, a second external task
/// after it; killed right after the first dispatch, the restart observes
/// the effect present, validates it once and goes on to the end.
#[test]
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

// Issue 9, defect 3 (a kill while the store is made left a store every
// run refused with 70): `e2e::store_creation::kills_at_random_moments_of_creation_never_block_the_next_run`.
