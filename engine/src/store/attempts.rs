//! Attempts: the intent (an attempt is born as the engine's durable
//! decision to send one exact request), its dispatch, its receipt, and how
//! it finished.

use providers::process::ProcessId;
use providers::sandbox::Record;
use providers::Handle;
use serde::Serialize;
use serde_json::Value;

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::evidence::{Classification, UnknownReason};
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, RequestFingerprint, Revision};
use crate::plan::model::Effect;
use crate::state::{AttemptKind, AttemptState, FailureClass};
use crate::store::queries::{self, Arg};

/// Operations of a store whose effect may have happened and no one has
/// settled: `unknown` (an attempt `effect_unknown`, waiting on a person's
/// settlement) and `in_doubt` (an attempt left between intent and receipt,
/// which the next run reconciles).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Unsettled {
    pub unknown: u64,
    pub in_doubt: u64,
}

impl Unsettled {
    pub fn total(self) -> u64 {
        self.unknown + self.in_doubt
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRecord {
    pub id: AttemptId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub operation_id: OperationId,
    pub try_no: i64,
    pub kind: AttemptKind,
    pub request_digest: RequestDigest,
    pub effect: Effect,
    pub cost: Cost,
    pub state: AttemptState,
    /// The fence (lease generation) of the engine that wrote the intent.
    pub generation: i64,
    pub intent_at_ms: i64,
    pub dispatched_at_ms: Option<i64>,
    pub dispatch_detail: Option<String>,
    pub finished_at_ms: Option<i64>,
    pub classification: Option<Classification>,
    pub unknown_reason: Option<UnknownReason>,
    pub reusable: Option<bool>,
    /// The checkpoint digest its validations judged.
    pub checkpoint: Option<String>,
    /// The checkpoint digest observed when its intent was written.
    pub inputs_at_intent: Option<String>,
    /// A repair's instruction, if any.
    pub instruction: Option<String>,
    /// The sandbox its provider process ran under (`None`: recorded before
    /// the engine kept it).
    pub sandbox: Option<Record>,
    /// The provider's own name for the request, once it accepted it (an
    /// MCP task id): what an engine asks about after a crash.
    pub handle: Option<Handle>,
    pub handle_at_ms: Option<i64>,
    /// The checkpoint digest of the goal's protected paths this attempt is
    /// judged against (observed before its intent).
    pub protected_at_intent: Option<String>,
}

/// The number of attempt `id` among `attempts` (one task's, in ledger
/// order): its position from 1; 0 when it is not among them.
pub fn number_in(attempts: &[AttemptRecord], id: AttemptId) -> i64 {
    attempts.iter().position(|a| a.id == id).map_or(0, |i| i as i64 + 1)
}

impl AttemptRecord {
    /// Proof that this attempt's intent is committed (it was read back).
    pub fn intent(&self) -> Intent {
        Intent(self.id)
    }

    pub fn class(&self) -> Option<crate::state::FailureClass> {
        self.classification.as_ref().map(|c| c.class)
    }

    /// The state it was in before its outcome became unknown, read from
    /// the traces each state leaves (a receipt, a dispatch time).
    pub fn last_known_state(&self, has_receipt: bool) -> AttemptState {
        if has_receipt {
            AttemptState::ReceiptRecorded
        } else if self.dispatched_at_ms.is_some() {
            AttemptState::Dispatched
        } else {
            AttemptState::IntentRecorded
        }
    }
}

/// A provider process an attempt still between intent and receipt
/// recorded at dispatch: what a stopped engine may have left running.
#[derive(Debug, Clone)]
pub struct LeftProcess {
    pub attempt_id: AttemptId,
    pub goal_id: GoalId,
    pub revision: Revision,
    pub task_ref: String,
    pub process: ProcessId,
}

/// Proof that an attempt's intent is committed: only `insert_intent` (a new
/// intent) and `AttemptRecord::intent` (one read back) build one, and
/// dispatch and receipt records take one — so a receipt cannot be written
/// for an attempt without its intent (the schema's foreign key says so
/// again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent(AttemptId);

impl Intent {
    /// Only the store builds one, from a committed row.
    pub(super) fn committed(id: AttemptId) -> Intent {
        Intent(id)
    }

    /// A committed intent as a test of the run's core (which has no store)
    /// is answered with.
    #[cfg(test)]
    pub(crate) fn for_test(id: AttemptId) -> Intent {
        Intent(id)
    }

    pub fn attempt_id(self) -> AttemptId {
        self.0
    }
}

/// The durable decision to send this exact request.
pub struct NewIntent<'a> {
    pub goal_id: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
    pub operation_id: &'a OperationId,
    pub try_no: i64,
    pub kind: AttemptKind,
    pub request_digest: &'a RequestDigest,
    pub request_json: &'a Value,
    pub effect: Effect,
    pub cost: Cost,
    pub inputs_at_intent: Option<&'a str>,
    pub instruction: Option<&'a str>,
    /// The sandbox the provider's process will run under, recorded with
    /// the intent.
    pub sandbox: &'a Record,
    /// The checkpoint digest of the protected paths it will be judged against.
    pub protected_at_intent: Option<&'a str>,
}

/// Which attempts `AttemptsRead::attempts_matching` reads.
#[derive(Debug, Clone, Copy)]
pub enum AttemptsWhere<'a> {
    OfTask(&'a GoalId, &'a str),
    InDoubt(&'a GoalId),
    InState(&'a GoalId, AttemptState),
    LatestInState(&'a GoalId, Revision, AttemptState),
}

impl<'a> AttemptsWhere<'a> {
    /// The condition on `attempts a`, in the dialect both stores read.
    pub(crate) fn condition(self) -> &'static str {
        match self {
            AttemptsWhere::OfTask(..) => queries::ATTEMPTS_OF_TASK,
            AttemptsWhere::InDoubt(_) => queries::ATTEMPTS_IN_DOUBT,
            AttemptsWhere::InState(..) => queries::ATTEMPTS_IN_STATE,
            AttemptsWhere::LatestInState(..) => queries::LATEST_ATTEMPTS_IN_STATE,
        }
    }

    /// The condition's parameters, `?1` first.
    pub(crate) fn args(self) -> Vec<Arg<'a>> {
        match self {
            AttemptsWhere::OfTask(goal, task) => vec![Arg::Text(goal.as_str()), Arg::Text(task)],
            AttemptsWhere::InDoubt(goal) => vec![Arg::Text(goal.as_str())],
            AttemptsWhere::InState(goal, state) => vec![Arg::Text(goal.as_str()), Arg::Text(state.as_str())],
            AttemptsWhere::LatestInState(goal, revision, state) => {
                vec![Arg::Text(goal.as_str()), Arg::Int(revision.get()), Arg::Text(state.as_str())]
            }
        }
    }
}

/// `AttemptsRead::same_request_unsettled`'s question, for the store.
#[derive(Debug, Clone, Copy)]
pub struct SameRequest<'a> {
    pub fingerprint: &'a RequestFingerprint,
    pub except: &'a OperationId,
    pub goal: &'a GoalId,
}

/// The call whose task's attempts the gate reads (`gate_attempts`).
#[derive(Debug, Clone, Copy)]
pub struct GateAsk<'a> {
    pub goal: &'a GoalId,
    pub revision: Revision,
    pub task_ref: &'a str,
    pub operation: &'a OperationId,
    pub request: &'a RequestDigest,
}

/// What the gate reads of a task's attempts and of its operation's
/// tries, each as its own read answers it (`AttemptsRead`'s methods).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateAttempts {
    /// `attempt_count` in the call's revision.
    pub count: u64,
    /// `first_unsettled_attempt`.
    pub unsettled: Option<(AttemptId, AttemptState)>,
    /// `prior_dispatch`.
    pub prior_dispatch: bool,
    /// `conflicting_request`.
    pub conflict: Option<RequestDigest>,
    /// `last_try` of the operation.
    pub last_try: i64,
}

/// How an attempt finished, as its columns hold it (both stores write
/// these, `queries::FINISH_COLUMNS` `?3`..`?9`): the classification's
/// parts, its id lists as JSON arrays, and why an outcome is unknown.
#[derive(Debug, Default)]
pub struct Finish<'a> {
    pub class: Option<FailureClass>,
    pub rule: Option<&'a str>,
    pub evidence_ids: Option<String>,
    pub claim_ids: Option<String>,
    pub next: Option<&'a str>,
    pub unknown_reason: Option<UnknownReason>,
}

impl<'a> Finish<'a> {
    pub fn of(classification: Option<&'a Classification>, unknown_reason: Option<UnknownReason>) -> Result<Self> {
        let Some(c) = classification else { return Ok(Finish { unknown_reason, ..Finish::default() }) };
        Ok(Finish {
            class: Some(c.class),
            rule: Some(&c.rule),
            evidence_ids: Some(id_list(&c.evidence_ids)?),
            claim_ids: Some(id_list(&c.claims)?),
            next: Some(&c.next),
            unknown_reason,
        })
    }
}

/// Ids as the JSON array their column holds.
fn id_list<T: Serialize>(ids: &[T]) -> Result<String> {
    serde_json::to_string(ids).map_err(|e| Error::internal(format!("ids do not serialize: {e}")))
}

pub trait AttemptsRead {
    fn attempt(&self, id: AttemptId) -> Result<AttemptRecord>;
    /// An attempt's state alone (not its whole row).
    fn attempt_state(&self, id: AttemptId) -> Result<AttemptState>;
    /// A task's attempts in every revision, oldest first.
    fn attempts_of_task(&self, goal: &GoalId, task_ref: &str) -> Result<Vec<AttemptRecord>> {
        self.attempts_matching(AttemptsWhere::OfTask(goal, task_ref))
    }
    /// Attempts left between intent and receipt: their outcome is in doubt.
    fn attempts_in_doubt(&self, goal: &GoalId) -> Result<Vec<AttemptRecord>> {
        self.attempts_matching(AttemptsWhere::InDoubt(goal))
    }
    fn attempts_in_state(&self, goal: &GoalId, state: AttemptState) -> Result<Vec<AttemptRecord>> {
        self.attempts_matching(AttemptsWhere::InState(goal, state))
    }
    /// Attempts in `state` that are their task's latest in `revision`.
    fn latest_attempts_in_state(
        &self,
        goal: &GoalId,
        revision: Revision,
        state: AttemptState,
    ) -> Result<Vec<AttemptRecord>> {
        self.attempts_matching(AttemptsWhere::LatestInState(goal, revision, state))
    }
    /// The attempts `which` names, oldest first: its shared condition
    /// (`AttemptsWhere::condition`) run in the store's dialect.
    fn attempts_matching(&self, which: AttemptsWhere<'_>) -> Result<Vec<AttemptRecord>>;
    fn receipt(&self, id: AttemptId) -> Result<Option<Value>>;
    /// When an attempt's receipt was recorded, if it has one.
    fn receipt_at(&self, id: AttemptId) -> Result<Option<i64>>;
    /// The highest try number of an operation so far (0 if none).
    fn last_try(&self, op: &OperationId) -> Result<i64>;
    /// The task's earliest attempt (of any operation or revision) that is
    /// unknown or in doubt: no new call of the task while one is.
    fn first_unsettled_attempt(&self, goal: &GoalId, task_ref: &str) -> Result<Option<(AttemptId, AttemptState)>>;
    /// The first attempt (of any goal) of another operation than `except`
    /// whose request has this fingerprint and whose outcome nobody knows:
    /// `effect_unknown`, or left between intent and receipt by a run of
    /// another goal (this goal's own such attempts are this run's in
    /// flight: a run reconciles its goal's leftovers before it sends).
    fn same_request_unsettled(
        &self,
        fingerprint: &RequestFingerprint,
        except: &OperationId,
        goal: &GoalId,
    ) -> Result<Option<AttemptRecord>> {
        let id = self.same_request_unsettled_id(SameRequest { fingerprint, except, goal })?;
        id.map(|id| self.attempt(id)).transpose()
    }
    /// The id of `same_request_unsettled`'s attempt: each store reads a
    /// request's fingerprint from its JSON in its own dialect.
    fn same_request_unsettled_id(&self, same: SameRequest<'_>) -> Result<Option<AttemptId>>;
    /// A request digest other than `request` that `op` was recorded with.
    fn conflicting_request(&self, op: &OperationId, request: &RequestDigest) -> Result<Option<RequestDigest>>;
    /// The attempts of a task in a revision that `max_attempts_per_task`
    /// counts: every one but those a person's stop cancelled.
    fn attempt_count(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<u64>;
    /// Was any earlier attempt of this task dispatched, or possibly so? An
    /// abandoned one (left in doubt by a crash) may have been; so may one a
    /// person settled, whatever became of it after.
    fn prior_dispatch(&self, goal: &GoalId, task_ref: &str) -> Result<bool>;
    /// The five reads above the gate makes for one call, in one answer:
    /// a store may read them together (SQLite: one statement).
    fn gate_attempts(&self, ask: GateAsk<'_>) -> Result<GateAttempts> {
        Ok(GateAttempts {
            count: self.attempt_count(ask.goal, ask.revision, ask.task_ref)?,
            unsettled: self.first_unsettled_attempt(ask.goal, ask.task_ref)?,
            prior_dispatch: self.prior_dispatch(ask.goal, ask.task_ref)?,
            conflict: self.conflicting_request(ask.operation, ask.request)?,
            last_try: self.last_try(ask.operation)?,
        })
    }
    /// The unknown try of an operation if there is one (a later try may
    /// exist beside it), else its latest.
    fn settlement_target(&self, op: &OperationId) -> Result<Option<AttemptRecord>>;
    /// How many attempts of the goal are `effect_unknown`.
    fn unknown_count(&self, goal: &GoalId) -> Result<u64>;
    /// Across every goal: the operations whose outcome no one knows yet.
    fn unsettled_operations(&self) -> Result<Unsettled>;
    /// Every attempt (of any goal) still between intent and receipt whose
    /// dispatch recorded a provider process.
    fn left_processes(&self) -> Result<Vec<LeftProcess>>;
    /// The task's newest `succeeded` or `settled_ok` attempt in `revision`.
    fn completed_attempt(&self, goal: &GoalId, revision: Revision, task_ref: &str) -> Result<Option<AttemptId>>;
}

pub trait AttemptsWrite {
    /// The intent, stamped with the transaction's fence; counts the call
    /// against the goal's budgets. `(operation_id, try_no)` is unique: one
    /// try is never recorded (so never dispatched) twice.
    fn insert_intent(&mut self, i: &NewIntent) -> Result<Intent>;
    /// Handed over; `process`: the provider process it runs in, if any.
    fn mark_dispatched(&mut self, intent: Intent, detail: &str, process: Option<&ProcessId>) -> Result<()>;
    /// The provider accepted the dispatched request under `handle`: its
    /// own durable write, once per attempt.
    fn record_handle(&mut self, intent: Intent, handle: &Handle) -> Result<()>;
    /// The provider's answer (or an observation standing in for it).
    fn insert_receipt(&mut self, intent: Intent, data: &Value) -> Result<()>;
    /// Through the attempt's transition table; with its classification
    /// and, for an unknown outcome, why (written by `finish_with`).
    fn finish_attempt(
        &mut self,
        id: AttemptId,
        to: AttemptState,
        classification: Option<&Classification>,
        unknown_reason: Option<UnknownReason>,
    ) -> Result<()> {
        let finish = Finish::of(classification, unknown_reason)?;
        self.finish_with(id, to, &finish)
    }
    /// The store's write of `finish_attempt`: the move through the table
    /// and the finish's columns (`queries::FINISH_COLUMNS`), one statement.
    fn finish_with(&mut self, id: AttemptId, to: AttemptState, finish: &Finish<'_>) -> Result<()>;
    /// A person's settlement moves the state only (through the table).
    fn settle_attempt(&mut self, id: AttemptId, to: AttemptState) -> Result<()>;
    /// Take a call back out of the budget counters: the provider refused
    /// it before anything was handed over.
    fn uncount_call(&mut self, id: AttemptId) -> Result<()>;
    /// What the provider reported it spent during the call, once per
    /// attempt (its receipt's transaction): kept on the attempt and added
    /// to the goal's cost counter, beside the call's declared cost.
    fn record_spending(&mut self, id: AttemptId, spent: crate::cost::Cost) -> Result<()>;
    fn set_attempt_checkpoint(&mut self, id: AttemptId, checkpoint: Option<&str>, reusable: bool) -> Result<()>;
    /// `finish_attempt` to `succeeded` (no classification) and then
    /// `set_attempt_checkpoint`: a store may write both as one change of
    /// the row (SQLite does: one `UPDATE` fewer per success).
    fn succeed_attempt(&mut self, id: AttemptId, checkpoint: Option<&str>, reusable: bool) -> Result<()> {
        self.finish_attempt(id, AttemptState::Succeeded, None, None)?;
        self.set_attempt_checkpoint(id, checkpoint, reusable)
    }
}
