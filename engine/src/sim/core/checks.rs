//! The invariants the core-model simulation holds the run core to: those
//! of the full-stack simulator (`sim::checks`, same names) that one run of
//! the core decides, judged at the request that could break each — a call
//! handed to the world, an intent, a look's resolution, a power loss, a
//! run's end — against the modelled ledger as another process would read
//! it. Each is a plain function of facts, tested below without a ledger.

use std::collections::{BTreeMap, BTreeSet};

use crate::decide::in_doubt::Observed;
use crate::error::Code;
use crate::ids::{AttemptId, OperationId};
use crate::plan::Budgets;
use crate::sim::checks::{
    Finding, BUDGETS_NEVER_PASSED, LOST_ONLY_RERUNS_LOCAL, NO_ANSWER_WITHOUT_PERSON, NO_BLIND_RESEND,
    NO_CALL_WITHOUT_INVENTORY, NO_INTERNAL_ERROR, NO_OWED_INTENT_LOST, NO_SEND_WITHOUT_INTENT, NO_START_WHILE_HELD,
    ONE_TRY_ONCE,
};
use crate::state::AttemptState;
use crate::store::attempts::AttemptRecord;

use super::ledger::State;

/// An outcome nobody knew, resolved only on evidence: the look found the
/// effect (or its absence, or the provider's own answer), or the effect is
/// safe to send again; an `effect_unknown` outcome only by a person.
pub const NO_RESOLUTION_WITHOUT_EVIDENCE: &str = "an unknown outcome is never resolved without evidence";

/// A try, by its operation and number.
pub type Try = (OperationId, i64);

/// A call handed to its provider, with what the invariants weigh.
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    pub task: &'a str,
    pub attempt: AttemptId,
    pub operation: &'a OperationId,
    pub try_no: i64,
    /// Free `none`/`local` work without approval: a power loss may take its
    /// intent, and then its work runs again (`sim::plan::Traits::replayable`).
    pub replayable: bool,
    /// Effect `none`, or idempotent: sending it again is safe.
    pub safe: bool,
    /// A tool of an MCP server, and whether this process read its server's tools.
    pub mcp: bool,
    pub inventory_read: bool,
    /// The call carries answers (no person recorded any in the model).
    pub answers: bool,
}

/// How an attempt left in doubt (or unknown) was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The look's observation is its receipt.
    Observed,
    /// The provider's own answer, fetched by the request's handle.
    ByHandle,
    /// Given up for a new try.
    Abandoned,
    /// Failed (the look found nothing, or re-sending is safe).
    Failed,
    /// Recorded as unknown: no evidence needed.
    Unknown,
}

/// What the checks learnt so far, and what they found.
#[derive(Debug, Default)]
pub struct Checker {
    /// Every try handed over, and each task's deliveries in order.
    sent: BTreeSet<Try>,
    deliveries: BTreeMap<String, Vec<(AttemptId, Try)>>,
    /// Tries sent whose intents a power loss took: their work may go again.
    replayed: BTreeSet<Try>,
    /// Intents of work that is not replayable, once seen committed.
    owed: BTreeMap<AttemptId, Try>,
    /// What the last look at each attempt found.
    looks: BTreeMap<AttemptId, Observed>,
    pub findings: Vec<Finding>,
}

impl Checker {
    fn found(&mut self, invariant: &'static str, detail: String) {
        self.findings.push(Finding { invariant, detail });
    }

    /// A call handed over, against the committed ledger `ledger`.
    pub fn on_send(&mut self, d: &Delivery, ledger: &State) {
        let at = format!("task {} attempt {} ({} try {})", d.task, d.attempt, d.operation, d.try_no);
        if ledger.try_of(d.attempt, d.operation, d.try_no).is_none() {
            self.found(NO_SEND_WITHOUT_INTENT, format!("{at} sent; the committed ledger holds no such intent"));
        }
        let this: Try = (d.operation.clone(), d.try_no);
        if self.sent.contains(&this) {
            match self.replayed.contains(&this) {
                false => self.found(ONE_TRY_ONCE, format!("{at} sent a second time")),
                true if !d.replayable => self.found(
                    LOST_ONLY_RERUNS_LOCAL,
                    format!("{at}: a lost intent of work that is not free local work sent again"),
                ),
                true => {}
            }
        }
        if d.mcp && !d.inventory_read {
            self.found(NO_CALL_WITHOUT_INVENTORY, format!("{at}: its server's tools were not read by this process"));
        }
        if d.answers {
            self.found(NO_ANSWER_WITHOUT_PERSON, format!("{at} carries answers no person gave"));
        }
        if !d.safe {
            self.check_resend(d, &at, ledger);
        }
        self.sent.insert(this.clone());
        self.deliveries.entry(d.task.to_string()).or_default().push((d.attempt, this));
    }

    /// An unsafe effect sent again while an earlier try of its task has
    /// an outcome the ledger does not hold (a try a power loss took is the
    /// lost intent's invariant, not this one).
    fn check_resend(&mut self, d: &Delivery, at: &str, ledger: &State) {
        let earlier = self.deliveries.get(d.task).into_iter().flatten();
        let looks = &self.looks;
        let open = earlier.filter(|(_, t)| t.0 != *d.operation || t.1 != d.try_no).find_map(|(id, (op, n))| {
            let a = ledger.try_of(*id, op, *n)?;
            // Abandoned after a look that found the effect absent is known.
            let abandoned = a.state == AttemptState::Abandoned && looks.get(id) != Some(&Observed::Absent);
            let open = a.state.in_doubt() || a.state == AttemptState::EffectUnknown || abandoned;
            open.then_some((a.id, a.state))
        });
        if let Some((id, state)) = open {
            self.found(NO_BLIND_RESEND, format!("{at} sent while its earlier attempt {id} is {state}"));
        }
    }

    /// An intent recorded (`held`: a person holds its task; `owed`: its
    /// work is not replayable): within the budgets, never of a held task.
    pub fn on_intent(&mut self, a: &AttemptRecord, (held, owed): (bool, bool), ledger: &State, budgets: &Budgets) {
        if held {
            self.found(NO_START_WHILE_HELD, format!("attempt {} of task {}, which a person holds", a.id, a.task_ref));
        }
        let counted = |x: &&AttemptRecord| x.state != AttemptState::Cancelled;
        let of_task = ledger.attempts_of(&a.task_ref).filter(counted).count() as u64;
        let calls = ledger.attempts.values().filter(counted).count() as u64;
        if of_task > u64::from(budgets.max_attempts_per_task) || calls > budgets.max_provider_calls {
            let detail = format!(
                "attempt {} of task {}: {of_task} attempts of the task (max {}), {calls} calls (max {})",
                a.id, a.task_ref, budgets.max_attempts_per_task, budgets.max_provider_calls
            );
            self.found(BUDGETS_NEVER_PASSED, detail);
        }
        if owed {
            self.owed.insert(a.id, (a.operation_id.clone(), a.try_no));
        }
    }

    /// A look at attempt `id` found `observed`.
    pub fn on_look(&mut self, id: AttemptId, observed: Observed) {
        self.looks.insert(id, observed);
    }

    /// Attempt `before` (as it was) resolved `how`; `safe`: its effect may be sent again.
    pub fn on_resolve(&mut self, before: &AttemptRecord, how: How, safe: bool) {
        let state = before.state;
        if how == How::Unknown || !(state.in_doubt() || state == AttemptState::EffectUnknown) {
            return;
        }
        let looked = self.looks.get(&before.id).copied();
        let evidence = match how {
            How::Observed => looked == Some(Observed::Present),
            How::ByHandle => looked == Some(Observed::Answered),
            How::Abandoned => safe || looked == Some(Observed::Absent),
            How::Failed => safe || looked == Some(Observed::Absent),
            How::Unknown => true,
        };
        if state == AttemptState::EffectUnknown || !evidence {
            let detail = format!(
                "attempt {} of task {} ({state}) resolved {how:?}; the look found {looked:?}",
                before.id, before.task_ref
            );
            self.found(NO_RESOLUTION_WITHOUT_EVIDENCE, detail);
        }
    }

    /// A power loss took the committed ledger `before` to `ledger`: every
    /// owed intent committed is still there; the tries sent whose intents
    /// went may run again.
    pub fn on_power_loss(&mut self, before: &State, ledger: &State) {
        let gone = |id: &AttemptId, t: &Try| {
            before.try_of(*id, &t.0, t.1).is_some() && ledger.try_of(*id, &t.0, t.1).is_none()
        };
        let lost: Vec<(AttemptId, Try)> =
            self.owed.iter().filter(|(id, t)| gone(id, t)).map(|(i, t)| (*i, t.clone())).collect();
        for (id, (op, n)) in lost {
            self.found(NO_OWED_INTENT_LOST, format!("attempt {id} ({op} try {n}) gone after a power loss"));
            self.owed.remove(&id);
        }
        let gone: Vec<Try> = self
            .deliveries
            .values()
            .flatten()
            .filter(|(id, t)| ledger.try_of(*id, &t.0, t.1).is_none())
            .map(|(_, t)| t.clone())
            .collect();
        self.replayed.extend(gone);
    }

    /// A run ended (`finished`: on its verdict's request): never on an
    /// internal error of its own.
    pub fn on_end(&mut self, ended: Option<(Code, &str)>, finished: bool) {
        if let (Some((Code::Internal, message)), false) = (ended, finished) {
            self.found(NO_INTERNAL_ERROR, format!("the run ended on an internal error: {message}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ledger::{intent, settle, Ledger};
    use super::*;
    use crate::ids::RequestDigest;
    use crate::plan::{Plan, PlanFile};
    use crate::state::AttemptKind;

    fn plan() -> Plan {
        let file = serde_json::json!({
            "version": 1,
            "goal": {"id": "checks", "statement": "the checks, alone", "acceptance": []},
            "budgets": {"max_attempts_per_task": 2, "max_provider_calls": 3, "max_cost": 0, "deadline_seconds": 60},
            "providers": {"api": {"kind": "http", "endpoint": "http://127.0.0.1:9/x"}},
            "tasks": [{"ref": "T1", "title": "t", "provider": "api", "effect": "external", "action": {"body": {}}},
                      {"ref": "T2", "title": "t", "provider": "api", "effect": "external", "action": {"body": {}}}],
        });
        let file: PlanFile = serde_json::from_value(file).expect("the test plan parses");
        Plan::from_file(file, std::env::temp_dir()).expect("the test plan is valid")
    }

    fn op(task: &str) -> OperationId {
        OperationId::new(format!("op-{task}"))
    }

    /// A ledger holding one committed intent of `task`.
    fn with_intent(plan: &Plan, task: &str) -> (Ledger, AttemptRecord) {
        let mut l = Ledger::new(plan, BTreeSet::new());
        let call = (task, &op(task), &RequestDigest::new("r"));
        let a = l.write(crate::store::Durability::Full, false, |s| intent(s, plan, call, AttemptKind::Run));
        (l, a)
    }

    fn delivery<'a>(task: &'a str, a: &'a AttemptRecord) -> Delivery<'a> {
        let (attempt, operation, try_no) = (a.id, &a.operation_id, a.try_no);
        Delivery {
            task,
            attempt,
            operation,
            try_no,
            replayable: false,
            safe: false,
            mcp: false,
            inventory_read: false,
            answers: false,
        }
    }

    fn invariants(c: &Checker) -> Vec<&'static str> {
        c.findings.iter().map(|f| f.invariant).collect()
    }

    #[test]
    fn a_send_needs_its_intent_committed() {
        let plan = plan();
        let (mut l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        assert!(c.findings.is_empty(), "{:?}", c.findings);
        // An intent still in the open group is not committed.
        l.begin_group();
        let call = ("T2", &op("T2"), &RequestDigest::new("r"));
        let b = l.write(crate::store::Durability::Full, true, |s| intent(s, &plan, call, AttemptKind::Run));
        c.on_send(&delivery("T2", &b), l.committed());
        assert_eq!(invariants(&c), [NO_SEND_WITHOUT_INTENT]);
    }

    #[test]
    fn one_try_goes_once_unless_a_power_loss_took_its_intent_of_free_local_work() {
        let plan = plan();
        let (mut l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        c.on_send(&delivery("T1", &a), l.committed());
        assert_eq!(invariants(&c), [ONE_TRY_ONCE]);
        // Its intent lost: the same try may go again, if it is replayable.
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        let before = l.committed().clone();
        l = Ledger::new(&plan, BTreeSet::new());
        c.on_power_loss(&before, l.committed());
        let (l2, a2) = with_intent(&plan, "T1");
        c.on_send(&Delivery { replayable: true, ..delivery("T1", &a2) }, l2.committed());
        assert!(c.findings.is_empty(), "{:?}", c.findings);
        c.on_power_loss(l2.committed(), Ledger::new(&plan, BTreeSet::new()).committed());
        c.on_send(&delivery("T1", &a2), l2.committed());
        assert_eq!(invariants(&c), [LOST_ONLY_RERUNS_LOCAL]);
    }

    #[test]
    fn an_unsafe_effect_is_not_sent_again_while_its_earlier_try_is_open() {
        let plan = plan();
        let (mut l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        l.write(crate::store::Durability::Full, false, |s| settle(s, a.id, AttemptState::Abandoned, None));
        let call = ("T1", &op("T1"), &RequestDigest::new("r"));
        let b = l.write(crate::store::Durability::Full, false, |s| intent(s, &plan, call, AttemptKind::Run));
        c.on_send(&delivery("T1", &b), l.committed());
        assert_eq!(invariants(&c), [NO_BLIND_RESEND]);
        // A safe effect may go again; an earlier try that failed is known.
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        c.on_send(&Delivery { safe: true, ..delivery("T1", &b) }, l.committed());
        l.write(crate::store::Durability::Full, false, |s| settle(s, a.id, AttemptState::Failed, None));
        let mut c = Checker::default();
        c.on_send(&delivery("T1", &a), l.committed());
        c.on_send(&delivery("T1", &b), l.committed());
        assert!(c.findings.is_empty(), "{:?}", c.findings);
    }

    #[test]
    fn a_tool_call_needs_its_servers_inventory_and_no_answers_are_made_up() {
        let plan = plan();
        let (l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_send(&Delivery { mcp: true, ..delivery("T1", &a) }, l.committed());
        assert_eq!(invariants(&c), [NO_CALL_WITHOUT_INVENTORY]);
        let mut c = Checker::default();
        c.on_send(&Delivery { mcp: true, inventory_read: true, answers: true, ..delivery("T1", &a) }, l.committed());
        assert_eq!(invariants(&c), [NO_ANSWER_WITHOUT_PERSON]);
    }

    #[test]
    fn a_held_task_starts_nothing_and_budgets_are_never_passed() {
        let plan = plan();
        let (l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_intent(&a, (false, true), l.committed(), &plan.file.budgets);
        assert!(c.findings.is_empty(), "{:?}", c.findings);
        c.on_intent(&a, (true, true), l.committed(), &plan.file.budgets);
        assert_eq!(invariants(&c), [NO_START_WHILE_HELD]);
        let tight = Budgets { max_provider_calls: 0, ..plan.file.budgets.clone() };
        let mut c = Checker::default();
        c.on_intent(&a, (false, true), l.committed(), &tight);
        assert_eq!(invariants(&c), [BUDGETS_NEVER_PASSED]);
    }

    #[test]
    fn an_owed_intent_survives_a_power_loss() {
        let plan = plan();
        let (l, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_intent(&a, (false, true), l.committed(), &plan.file.budgets);
        c.on_power_loss(l.committed(), l.committed());
        let empty = Ledger::new(&plan, BTreeSet::new());
        // Never committed (a group the crash dropped): nothing was owed.
        c.on_power_loss(empty.committed(), empty.committed());
        assert!(c.findings.is_empty());
        c.on_power_loss(l.committed(), empty.committed());
        assert_eq!(invariants(&c), [NO_OWED_INTENT_LOST]);
    }

    #[test]
    fn an_outcome_in_doubt_is_resolved_only_on_evidence_and_an_unknown_one_only_by_a_person() {
        let plan = plan();
        let (_, a) = with_intent(&plan, "T1");
        let mut c = Checker::default();
        c.on_resolve(&a, How::Observed, false);
        c.on_resolve(&a, How::Abandoned, false);
        c.on_resolve(&a, How::Failed, false);
        assert_eq!(c.findings.len(), 3, "{:?}", c.findings);
        let mut c = Checker::default();
        c.on_look(a.id, Observed::Present);
        c.on_resolve(&a, How::Observed, false);
        c.on_resolve(&a, How::Abandoned, true);
        c.on_resolve(&a, How::Unknown, false);
        assert!(c.findings.is_empty(), "{:?}", c.findings);
        // A look that found the effect absent is evidence for giving it up.
        let mut c2 = Checker::default();
        c2.on_look(a.id, Observed::Absent);
        c2.on_resolve(&a, How::Abandoned, false);
        c2.on_resolve(&a, How::Failed, false);
        assert!(c2.findings.is_empty(), "{:?}", c2.findings);
        let unknown = AttemptRecord { state: AttemptState::EffectUnknown, ..a };
        c.on_resolve(&unknown, How::Observed, true);
        assert_eq!(invariants(&c), [NO_RESOLUTION_WITHOUT_EVIDENCE]);
    }

    #[test]
    fn a_run_never_ends_on_an_internal_error_of_its_own() {
        let mut c = Checker::default();
        c.on_end(None, false);
        c.on_end(Some((Code::ToolInventoryUnavailable, "refused")), false);
        c.on_end(Some((Code::Internal, "the model writes no report")), true);
        assert!(c.findings.is_empty());
        c.on_end(Some((Code::Internal, "attempt 3 is not in flight")), false);
        assert_eq!(invariants(&c), [NO_INTERNAL_ERROR]);
    }
}
