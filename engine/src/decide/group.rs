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
//! after a crash asks the provider by it, and the call is out meanwhile),
//! and so is the dispatch record: a crash once the answer is back must find
//! the call recorded as handed over (`dispatched`), as before.

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
    /// The provider has the call: the dispatch record.
    Dispatched,
    /// The provider named the request.
    Handle,
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
        Handling::Spawned => true,
        Handling::Dispatched | Handling::Handle => false,
        Handling::Finished { stopped: true, .. } => false,
        Handling::Finished { answer: Answer::Received, judged_by_receipt, .. } => judged_by_receipt,
        Handling::Finished { answer: Answer::NotDispatched, .. } => true,
        Handling::Finished { answer: Answer::Lost, .. } => false,
        Handling::Validated { stopped } => !stopped,
    }
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
    fn a_requests_handle_and_its_dispatch_are_committed_the_moment_they_arrive() {
        assert!(!shares_commit(Handling::Handle));
        assert!(!shares_commit(Handling::Dispatched));
    }
}
