//! The report document: everything `engine report` shows, as plain data.
//! It is the `--json` output (field names are stable; see docs/report.md)
//! and the only input of the HTML renderer.

use serde::Serialize;
use serde_json::Value;

use crate::evidence::Evidence;

/// The value of `format`: bumped when a field changes meaning or goes away.
pub const FORMAT: &str = "engine-report/1";

#[derive(Debug, Clone, Serialize)]
pub struct ReportDocument {
    pub format: String,
    pub engine_version: String,
    /// When the report was made (UTC, RFC 3339); `null` with `--no-timestamp`.
    pub generated_at: Option<String>,
    pub goal: GoalSection,
    pub revision: RevisionSection,
    pub budgets: Budgets,
    /// In plan order.
    pub tasks: Vec<TaskReport>,
    /// What waits on a person, with the command to run.
    pub waiting: Vec<Waiting>,
    pub timeline: Timeline,
    /// The goal's act rows the act chain does not vouch for
    /// (`STORE_TAMPERED`, each naming its row): never shown as acts.
    pub store_tampered: Vec<TamperedRow>,
}

/// An act row the act chain does not vouch for: no act, whatever it says.
#[derive(Debug, Clone, Serialize)]
pub struct TamperedRow {
    /// Always `STORE_TAMPERED`.
    pub code: String,
    /// `approvals row 7`.
    pub row: String,
    pub problem: String,
    /// The whole sentence, code first.
    pub words: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GoalSection {
    pub id: String,
    pub statement: String,
    /// The goal's state as the ledger holds it (about its active revision).
    pub state: String,
    /// What that state claims, in the engine's words.
    pub claims: String,
    /// What it does not claim.
    pub does_not_claim: String,
    pub active_revision: i64,
    pub first_run_at_ms: i64,
    pub acceptance: Vec<AcceptanceLine>,
    pub constraints: Vec<ConstraintLine>,
    pub revisions: Vec<RevisionLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceLine {
    pub id: String,
    pub statement: String,
    /// The check's argv; `null`: the criterion has no check (not verified).
    pub check: Option<Vec<String>>,
    pub expect_exit: Option<i32>,
    /// `passed`, `failed`, `not_run` (has a check, no result in this
    /// revision) or `no_check`.
    pub result: String,
    /// The latest result's evidence (ledger order).
    pub evidence: Option<EvidenceItem>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConstraintLine {
    /// A checkable constraint's id (`null` for a plain statement).
    pub id: Option<String>,
    pub statement: String,
    /// `false` for a plain statement: recorded, not checked.
    pub checked_by_engine: bool,
    /// The paths no attempt may change (globs).
    pub protect: Vec<String>,
    /// The check's argv, run after every attempt's validations.
    pub check: Option<Vec<String>>,
}

impl ConstraintLine {
    pub fn of(c: &crate::plan::Constraint) -> ConstraintLine {
        let checked = c.checked();
        ConstraintLine {
            id: checked.map(|c| c.id.clone()),
            statement: c.statement().to_string(),
            checked_by_engine: checked.is_some(),
            protect: checked.map(|c| c.protect.clone()).unwrap_or_default(),
            check: checked.and_then(|c| c.check.as_ref()).map(|k| k.run.clone()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RevisionLine {
    pub revision: i64,
    pub parent: Option<i64>,
    pub reason: Option<String>,
    pub plan_digest: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RevisionSection {
    pub number: i64,
    /// `false` when `--revision` picked an earlier one: nothing more runs
    /// for it, and nothing of it waits on a person.
    pub active: bool,
    pub plan_path: String,
    pub plan_digest: String,
    pub goal_contract_digest: String,
    pub reason: Option<String>,
    /// The engine runs of this revision (from `run_started`), oldest first.
    pub runs: Vec<RunLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunLine {
    pub started_at_ms: i64,
    /// `--jobs` of that run: how many tasks it could run at once.
    pub jobs: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Used<T> {
    pub used: T,
    pub limit: T,
}

#[derive(Debug, Clone, Serialize)]
pub struct Budgets {
    /// Goal-wide: every call that was, or may have been, dispatched.
    pub provider_calls: Used<i64>,
    /// Goal-wide: the cost of those calls.
    pub cost: Used<f64>,
    /// The most attempts any task of this revision had.
    pub attempts_per_task: Used<i64>,
    /// Revisions after the first; the limit is the lowest any revision set.
    pub revisions: Used<i64>,
    pub deadline: Deadline,
}

#[derive(Debug, Clone, Serialize)]
pub struct Deadline {
    /// `deadline_seconds` in force: it bounds each run of work (from the
    /// start of each `run`, `repair`, `retry` or `revise`), not the goal.
    pub limit_seconds: i64,
    /// When the last run of this revision began, if one did.
    pub last_run_at_ms: Option<i64>,
    /// `last_run_at_ms` + the limit: no call of that run was sent after.
    pub ends_at_ms: Option<i64>,
    /// The latest time recorded on an attempt or check of this revision
    /// (not "now": a report of the same ledger is the same report).
    pub last_activity_at_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    #[serde(rename = "ref")]
    pub task_ref: String,
    pub title: String,
    pub provider: String,
    pub effect: String,
    /// The cost of one of its calls, as the plan declares it.
    pub cost: crate::cost::Cost,
    pub depends_on: Vec<String>,
    /// The task's state in this revision (SPEC's task states).
    pub state: String,
    /// The failure class of its latest classified attempt, when failed.
    pub class: Option<String>,
    /// Why it waits or stopped, as the engine recorded it.
    pub why: Option<String>,
    /// A completion under a dependency that failed since or runs again
    /// (`decide::upstream`): drawn `kept` or `stale`, never `succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<crate::decide::upstream::Upstream>,
    pub operation_id: String,
    pub request_digest: String,
    /// The reuse decision `engine revise` recorded for this revision.
    pub reuse: Option<ReuseLine>,
    /// Every attempt of this task ref, all revisions, in ledger order.
    pub attempts: Vec<AttemptReport>,
    /// Approvals a person gave for this task, in ledger order.
    pub approvals: Vec<ApprovalLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReuseLine {
    /// `reuse` or `run`.
    pub decision: String,
    /// The refusing reason's code (`MEANING_CHANGED`, …) for `run`.
    pub reason: Option<String>,
    pub detail: String,
    /// Where a reused result came from.
    pub provenance: Option<Provenance>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    pub revision: i64,
    pub attempt_id: i64,
    /// That attempt's number among its task's attempts.
    pub attempt: i64,
    pub checkpoint: String,
    pub evidence_ids: Vec<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptReport {
    /// The ledger's id of the attempt (store-wide).
    pub id: i64,
    /// Its number among its task's attempts, every revision, in ledger
    /// order: "attempt 2" is the task's second (`engine explain`'s).
    pub number: i64,
    pub revision: i64,
    #[serde(rename = "try")]
    pub try_no: i64,
    /// `run`, `repair`, `retry`, `rerun`.
    pub kind: String,
    /// SPEC's attempt states.
    pub state: String,
    pub operation_id: String,
    pub request_digest: String,
    pub effect: String,
    pub cost: f64,
    pub intent_at_ms: i64,
    pub dispatched_at_ms: Option<i64>,
    pub receipt_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    pub dispatch_detail: Option<String>,
    /// The provider's own name for the request once it accepted it (an
    /// MCP task id), and when it was recorded.
    pub handle: Option<providers::Handle>,
    pub handle_at_ms: Option<i64>,
    pub unknown_reason: Option<String>,
    pub instruction: Option<String>,
    pub classification: Option<Classification>,
    pub evidence: Vec<EvidenceItem>,
    /// What the provider or a model said: never verified by the engine.
    pub claims: Vec<ClaimLine>,
    pub settlement: Option<SettlementLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Classification {
    pub class: String,
    pub rule: String,
    pub evidence_ids: Vec<i64>,
    pub next: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvidenceItem {
    pub id: i64,
    pub at_ms: i64,
    /// As recorded: tagged by `kind` (`process_exit`, `check_result`, …).
    pub evidence: Evidence,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClaimLine {
    pub id: i64,
    pub authority: String,
    pub data: Value,
    /// Always `false`: a claim is kept, never verified or promoted.
    pub verified: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SettlementLine {
    pub outcome: String,
    pub actor: String,
    pub note: String,
    pub at_ms: i64,
    pub evidence_blob: Option<String>,
    /// Always `false`: a settlement is a person's word.
    pub verified_by_engine: bool,
    /// `STORE_TAMPERED: settlements row N ...` when the act chain does not
    /// vouch for the row: then it is no settlement.
    pub store_tampered: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApprovalLine {
    pub id: i64,
    pub operation_id: String,
    pub revision: i64,
    pub request_digest: String,
    pub actor: String,
    pub note: String,
    pub at_ms: i64,
    /// The attempt that used it, if one did.
    pub consumed_by: Option<i64>,
    /// The attempt that voided it (a call that needed no approval).
    pub voided_by: Option<i64>,
    /// `STORE_TAMPERED: approvals row N ...` when the act chain does not
    /// vouch for the row: then it is no approval.
    pub store_tampered: Option<String>,
    /// When it expires (`engine approve --for`); `None`: never.
    pub expires_at_ms: Option<i64>,
    /// Unspent and past its time when the report was made: never spent.
    pub expired: bool,
    /// Unspent and not yet expired: its time left when the report was
    /// made, in words (`expires in 4 min`); the page reads no clock.
    pub expires_in: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Waiting {
    /// `settle`, `approve`, `answer`, `retry` (settled not_run), `failed`, `in_doubt`.
    pub kind: String,
    pub task_ref: String,
    pub operation_id: Option<String>,
    #[serde(rename = "try")]
    pub try_no: Option<i64>,
    pub why: String,
    /// For a call waiting on an approval: what it costs, as the plan
    /// declares it (what the person approves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::Cost>,
    /// The exact commands a person may run, first the one SPEC offers.
    pub commands: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// The first intent of this revision's attempts.
    pub start_ms: Option<i64>,
    /// The last time recorded on them (or on the acceptance checks).
    pub end_ms: Option<i64>,
    /// Most attempts in flight at once (intent to finish).
    pub max_parallel: i64,
    /// The number in flight after each change, in time order.
    pub concurrency: Vec<ConcurrencyStep>,
    /// The acceptance checks' results, at the time each was recorded.
    pub acceptance: Vec<CheckMark>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConcurrencyStep {
    pub at_ms: i64,
    pub running: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckMark {
    pub check_id: String,
    pub passed: bool,
    pub at_ms: i64,
    pub evidence_id: i64,
}
