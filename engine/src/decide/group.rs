//! Group commit: may what the run loop is about to record share one commit
//! with the intents of the tasks it then starts?
//!
//! Two rules make sharing safe. Every intent is committed before its own
//! dispatch: the run loop sends nothing of a group before the group's
//! commit. A receipt is committed before anything acts on it: a dependent's
//! dispatch acts on it, and it waits for the same commit. So a message may
//! join the group only when handling it acts on nothing outside the ledger
//! — it records, and the next act (a dispatch) comes after the commit.
//! Handling that acts at once (starting validations on an answer, asking a
//! provider about a lost answer by its handle, ending a stopped call) is
//! recorded and committed on its own first, as before; so is a request's
//! handle, which must be durable the moment it arrives (an engine restarted
//! after a crash asks the provider by it, and the call is out meanwhile).
//!
//! The dispatch record (`dispatched`, `synchronous=NORMAL`) joins the group
//! only when losing it to a crash changes nothing (`dispatch_may_wait`);
//! otherwise it is committed on its own the moment it arrives, as before.

use crate::plan::model::Effect;

/// What a provider's call came back with, as far as grouping cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The provider answered (a receipt).
    Received,
    /// Nothing was handed over.
    NotDispatched,
    /// The answer was lost: the engine looks (by handle, or at the target).
    Lost,
}

/// A message of the run loop, as far as grouping cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// A provider process started (kept in memory until its dispatch is recorded).
    Spawned,
    /// The provider has the call: the dispatch record (`may_wait`: see
    /// `dispatch_may_wait`).
    Dispatched { may_wait: bool },
    /// The provider named the request.
    Handle,
    /// The provider's word on its progress: shown, never recorded.
    Note,
    /// The call ended. `stopped`: a person's stop reached it. `judged_by_receipt`:
    /// its task has no validations and its goal nothing checkable, so an ok
    /// answer is the task's success, with nothing to run after it.
    Finished { answer: Answer, stopped: bool, judged_by_receipt: bool },
    /// The attempt's validations ran (`stopped`: a person's stop ended one).
    Validated { stopped: bool },
}

/// May this message's records share the next commit with the intents that follow?
pub fn shares_commit(h: Handling) -> bool {
    match h {
        Handling::Spawned | Handling::Note => true,
        Handling::Dispatched { may_wait } => may_wait,
        Handling::Handle => false,
        Handling::Finished { stopped: true, .. } => false,
        Handling::Finished { answer: Answer::Received, judged_by_receipt, .. } => judged_by_receipt,
        Handling::Finished { answer: Answer::NotDispatched, .. } => true,
        Handling::Finished { answer: Answer::Lost, .. } => false,
        Handling::Validated { stopped } => !stopped,
    }
}

/// May a call's dispatch record wait for the group's commit instead of
/// committing on its own? A crash before that commit loses it: the call is
/// found `intent_recorded`, with no dispatch time and no provider process.
/// That changes nothing only for a free task whose effect is `none` and
/// whose call started no process. Recovery treats an attempt without its
/// receipt alike in either state (looks, then resolves it by what it found
/// and the task's effect), and what a dispatch time alone decides does not
/// apply to such a task: the approval of a repeat (paid or external work
/// only), the state an unknown outcome is reported from (an effect `none`
/// is never left unknown), the process group a later engine ends.
pub fn dispatch_may_wait(effect: Effect, paid: bool, process_recorded: bool) -> bool {
    effect == Effect::None && !paid && !process_recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(answer: Answer, stopped: bool, judged_by_receipt: bool) -> Handling {
        Handling::Finished { answer, stopped, judged_by_receipt }
    }

    #[test]
    fn a_receipt_that_is_the_whole_verdict_shares_the_next_intents_commit() {
        assert!(shares_commit(finished(Answer::Received, false, true)));
        assert!(shares_commit(finished(Answer::NotDispatched, false, false)));
        assert!(shares_commit(Handling::Spawned));
        assert!(shares_commit(Handling::Validated { stopped: false }));
    }

    #[test]
    fn an_answer_something_acts_on_at_once_is_committed_on_its_own() {
        // Validations start on an ok answer: they act on the receipt.
        assert!(!shares_commit(finished(Answer::Received, false, false)));
        // A lost answer is looked for (the provider asked by handle).
        assert!(!shares_commit(finished(Answer::Lost, false, true)));
        // A stopped call: whatever it answered, a person's stop decides.
        assert!(!shares_commit(finished(Answer::Received, true, true)));
        assert!(!shares_commit(finished(Answer::NotDispatched, true, true)));
        assert!(!shares_commit(Handling::Validated { stopped: true }));
    }

    #[test]
    fn a_requests_handle_and_a_dispatch_that_may_not_wait_are_committed_the_moment_they_arrive() {
        assert!(!shares_commit(Handling::Handle));
        assert!(!shares_commit(Handling::Dispatched { may_wait: false }));
        assert!(shares_commit(Handling::Dispatched { may_wait: true }));
    }

    #[test]
    fn only_a_dispatch_whose_loss_changes_nothing_may_wait() {
        assert!(dispatch_may_wait(Effect::None, false, false));
        // Its process group is ended after a crash by this record.
        assert!(!dispatch_may_wait(Effect::None, false, true));
        // A repeat of paid work needs an approval when an earlier try was
        // sent: an attempt found absent and failed counts by its dispatch time.
        assert!(!dispatch_may_wait(Effect::None, true, false));
        for effect in [Effect::Local, Effect::External] {
            for (paid, process) in [(false, false), (true, false), (false, true)] {
                assert!(!dispatch_may_wait(effect, paid, process), "{effect:?}");
            }
        }
    }
}
