//! The append-only event log. `seq` is the ledger's own order (never wall
//! time); the store refuses to change or delete an event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::ids::{AttemptId, GoalId, Revision, Seq};

macro_rules! event_kinds {
    ($($(#[$m:meta])* $variant:ident = $s:literal),+ $(,)?) => {
        /// Every kind of event the engine writes. `as_str` is the stable
        /// word in the ledger and in `engine log`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum EventKind { $($(#[$m])* $variant),+ }

        impl EventKind {
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(EventKind::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<EventKind> {
                match s { $($s => Some(EventKind::$variant),)+ _ => None }
            }
        }
    };
}

event_kinds! {
    // The store itself.
    LeaseTakenOver = "lease_taken_over",
    ClaimTakenOver = "claim_taken_over",
    ProviderProcessesEnded = "provider_processes_ended",
    // A goal and its revisions.
    GoalRegistered = "goal_registered",
    GoalSubmitted = "goal_submitted",
    RevisionRecorded = "revision_recorded",
    RunStarted = "run_started",
    RunFinished = "run_finished",
    /// The plan file changed while a run was going (by anything but a
    /// person's `engine revise`): the run went on with the revision as
    /// recorded.
    PlanFileChanged = "plan_file_changed",
    /// A person's signal (SIGINT, SIGTERM, SIGHUP) stopped new dispatches
    /// and sent SIGTERM to the process groups in flight.
    RunStopping = "run_stopping",
    /// The stop is over: what it cancelled, kept or left unknown.
    RunStopped = "run_stopped",
    AcceptanceChecked = "acceptance_checked",
    /// The goal's constraint checks, run before its acceptance checks.
    ConstraintsChecked = "constraints_checked",
    /// An MCP provider's tools (names and input-schema digests), listed
    /// before the run's first intent.
    ToolInventory = "tool_inventory",
    // A task.
    TaskState = "task_state",
    CompletionStale = "completion_stale",
    /// A completion put off because an upstream ran again, kept: the
    /// outputs it stands on are byte-identical (early cutoff,
    /// `UPSTREAM_OUTPUT_UNCHANGED`).
    CompletionKept = "completion_kept",
    CompletionNotReusable = "completion_not_reusable",
    RetryRequested = "retry_requested",
    RepairRequested = "repair_requested",
    // The call site.
    CallRefused = "call_refused",
    BudgetExhausted = "budget_exhausted",
    ApprovalRequired = "approval_required",
    ApprovalsVoided = "approvals_voided",
    IntentRecorded = "intent_recorded",
    // An attempt.
    Dispatched = "dispatched",
    /// The provider accepted the request under its own name (an MCP task id).
    HandleRecorded = "handle_recorded",
    /// A lost answer was fetched from the provider by the request's handle.
    AnsweredByHandle = "answered_by_handle",
    ReceiptRecorded = "receipt_recorded",
    /// What a provider said of its progress (an MCP server's
    /// `notifications/progress`): its word, escaped when shown; at most
    /// `PROGRESS_EVENTS_MAX` per attempt (`run::core::messages`).
    ProviderProgress = "provider_progress",
    /// The provider's answer is a question for a person (MCP elicitation):
    /// the task waits for `engine answer`.
    InputRequested = "input_requested",
    /// A person answered it (`engine answer`), on the act chain.
    InputAnswered = "input_answered",
    /// A server's question during a call, held open for a person (an MCP
    /// provider's `ask.wait_seconds`) until `until_ms`: `engine answer`
    /// answers it from another terminal while the call waits (`run::held`).
    InputHeld = "input_held",
    /// The provider's report said it spent this during the call (an
    /// agent's `spent`): the provider's word, counted in the goal's cost.
    SpendingReported = "spending_reported",
    AttemptSucceeded = "attempt_succeeded",
    /// A succeeded attempt's declared outputs, kept in the ledger with
    /// its success (files, bytes).
    OutputsRecorded = "outputs_recorded",
    /// Upstream tasks' outputs written into this workspace before a task
    /// ran (files written, bytes, files already right and left alone).
    OutputsMaterialized = "outputs_materialized",
    AttemptFailed = "attempt_failed",
    EffectUnknown = "effect_unknown",
    ObservedEffectPresent = "observed_effect_present",
    /// A person's retry read the target back first and found the effect
    /// there: the try holds the read-back as its receipt; nothing was sent.
    CompletedFromReadBack = "completed_from_read_back",
    Reconciling = "reconciling",
    RerunAfterRestart = "rerun_after_restart",
    SupersededAttemptReconciled = "superseded_attempt_reconciled",
    /// A person's stop ended an attempt's call: cancelled, or its observed
    /// effect kept as the receipt.
    AttemptCancelled = "attempt_cancelled",
    /// A person's stop ended an attempt's validations: its receipt is kept
    /// for the next run to judge.
    ValidationsStopped = "validations_stopped",
    // A person's acts.
    ApprovalRecorded = "approval_recorded",
    Settled = "settled",
    /// A person raised a budget (`engine revise --raise NAME=VALUE`).
    BudgetRaised = "budget_raised",
    /// A person held a task or the goal (`engine hold`), on the act chain.
    Held = "held",
    /// A person released a hold (`engine release`), on the act chain.
    Released = "released",
    /// A person asked a succeeded task to run again (`engine rerun`).
    RerunRequested = "rerun_requested",
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event to append.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub kind: EventKind,
    pub goal_id: Option<&'a GoalId>,
    pub revision: Option<Revision>,
    pub task_ref: Option<&'a str>,
    pub attempt_id: Option<AttemptId>,
    pub data: Value,
}

impl<'a> Event<'a> {
    /// An event about the store itself (lease, migration).
    pub fn store(kind: EventKind, data: Value) -> Self {
        Event { kind, goal_id: None, revision: None, task_ref: None, attempt_id: None, data }
    }

    pub fn goal(kind: EventKind, goal_id: &'a GoalId, revision: Revision, data: Value) -> Self {
        Event { kind, goal_id: Some(goal_id), revision: Some(revision), task_ref: None, attempt_id: None, data }
    }

    pub fn task(mut self, task_ref: &'a str) -> Self {
        self.task_ref = Some(task_ref);
        self
    }

    pub fn attempt(mut self, attempt_id: AttemptId) -> Self {
        self.attempt_id = Some(attempt_id);
        self
    }
}

/// An event as the log holds it.
#[derive(Debug, Clone, Serialize)]
pub struct EventRecord {
    pub seq: Seq,
    pub at_ms: i64,
    pub goal_id: Option<GoalId>,
    pub revision: Option<Revision>,
    pub task_ref: Option<String>,
    pub attempt_id: Option<AttemptId>,
    pub kind: EventKind,
    pub data: Value,
}

/// Every event of the store, in ledger order, read a page at a time.
pub(crate) fn every_event(read: &(impl EventsRead + ?Sized)) -> Result<Vec<EventRecord>> {
    let mut out = Vec::new();
    let mut after = Seq(0);
    loop {
        let page = read.events_since(after, crate::limits::LOG_PAGE_EVENTS)?;
        let Some(last) = page.last() else { return Ok(out) };
        after = last.seq;
        out.extend(page);
    }
}

pub trait EventsRead {
    /// Events after `after`, oldest first, at most `limit`.
    fn events_since(&self, after: Seq, limit: i64) -> Result<Vec<EventRecord>>;
    /// The same, of one goal only.
    fn goal_events_since(&self, goal: &GoalId, after: Seq, limit: i64) -> Result<Vec<EventRecord>>;
    /// The newest event of `kind` of a goal's revision.
    fn latest_event(&self, goal: &GoalId, revision: Revision, kind: EventKind) -> Result<Option<EventRecord>>;
    /// A goal's events of one kind, oldest first (a report reads the reuse
    /// decisions of `revision_recorded` and the runs' `run_started`).
    fn events_of_goal(&self, goal: &GoalId, kind: EventKind) -> Result<Vec<EventRecord>>;
}

pub trait EventsWrite {
    fn append_event(&mut self, e: &Event) -> Result<Seq>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_itself() {
        for &k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), Value::String(k.as_str().to_string()));
        }
        assert_eq!(EventKind::parse("no_such_event"), None);
    }
}
