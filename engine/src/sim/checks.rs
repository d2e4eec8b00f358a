//! The invariants, checked as the simulation goes: each call a provider
//! receives against the ledger as committed at that moment (through a
//! connection of its own, as another process would read it), and the
//! ledger after every step that committed something.
//!
//! | invariant | checked |
//! | --- | --- |
//! | no send without a committed intent | at each delivery: its attempt is in the ledger, same operation and try |
//! | one try is never sent twice | at each delivery, against every earlier one |
//! | no call to a server whose tools could not be read | at each delivery of an MCP tool call: this engine process read its server's `tools/list` |
//! | no re-send of an unsafe effect whose outcome the ledger does not hold, without a person's act | at each delivery of a task whose effect is `local` or `external` and not idempotent, after an earlier delivery of it |
//! | a repeat of paid or external work carries a fresh approval, consumed by its own call | at each such delivery after an earlier one of the task |
//! | never satisfied while an outcome is unknown | at each verdict (`run_finished`) |
//! | budgets never passed | after each commit (calls, cost) and at each intent (attempts of its task) |
//! | budget counters equal the attempts they count | after each command |
//! | no committed row lost | after each commit: the log's last entry never goes back |
//! | every act on the chain; the ledger whole | `engine verify`, after a crash and at the end |
//! | no command ends in an internal error or a panic | each command (a process that died aside) |
//! | no answer sent without a person's act | at each delivery that carries answers: the ledger holds a person's `answer` for that operation, with exactly those answers |
//! | no external or paid intent lost | at each simulated power loss: every intent seen, and every call sent, of work that is not free `none`/`local` is still in the ledger |
//! | no committed person's act lost | at each simulated power loss: every act and revision seen is still in the ledger |
//! | a lost intent only re-runs local work | at each delivery of a try whose intent a power loss took: its task is free `none`/`local` work without approval (only then may one try reach its provider twice) |
//! | a held task never starts an attempt while held | at each intent, in ledger order: no hold of its task nor of the goal (`engine hold`) is in force without a later release |
//! | an expired approval is never spent | at each delivery: no approval consumed by its attempt had expired at its intent |
//! | a rerun re-runs exactly the chosen tasks and keeps the rest | at each `engine rerun`: the tasks it made pending are the one named and, with `--downstream`, its dependants (transitively), by the plan; until the next revision no other task complete before it starts an attempt |
//! | a person's stop never consumes an attempt | at each `max_attempts_per_task` stop: the task's attempts in the revision, those a person's stop cancelled left out, reach the limit |
//! | never reused across a changed tool without a person's act | after each plain run that ended: a task it kept on its completion recorded the service version the newest completion of its provider had when the run began, or a `--reuse-across-tool-change` kept it (`tools`) |
//! | a dependant is kept across its upstream's re-run only on byte-identical outputs | after each plain run that ended: a task complete on an attempt made from an upstream completion since replaced stands only if that upstream declares outputs, has no `external` effect, and its new completion recorded the same files, bytes and execute bits; a person's rerun of the upstream alone keeps them for its run (for good when the upstream cannot cut off) (`cutoff`) |
//! | a kept task's recorded outputs are in its workspace | after each plain run that ended: each complete task whose upstreams are complete has the files its completion recorded in the workspace, byte for byte (`cutoff`) |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

mod cutoff;
mod delivery;
mod tools;

pub use cutoff::Made;
use delivery::{answers_recorded, expired_not_spent, intent_committed, not_blind, repeat_approved};

use super::plan::Traits;
use super::world::Delivery;
use crate::ids::{AttemptId, GoalId, Revision, Seq};
use crate::plan::{Budgets, PlanFile};
use crate::state::AttemptState;
use crate::store::events::{EventKind, EventRecord};
use crate::store::Store;

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub invariant: &'static str,
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

pub const NO_SEND_WITHOUT_INTENT: &str = "no send without a committed intent";
pub const ONE_TRY_ONCE: &str = "one try is never sent twice";
pub const NO_CALL_WITHOUT_INVENTORY: &str = "no call to a server whose tools could not be read";
pub const NO_BLIND_RESEND: &str = "no re-send of an unknown outcome without a person's act";
pub const REPEAT_NEEDS_APPROVAL: &str = "a repeat of paid or external work carries a fresh approval";
pub const NEVER_SATISFIED_OVER_UNKNOWN: &str = "never satisfied while an outcome is unknown";
pub const BUDGETS_NEVER_PASSED: &str = "budgets never passed";
pub const COUNTERS_EQUAL_ATTEMPTS: &str = "budget counters equal the attempts they count";
pub const NO_ROW_LOST: &str = "no committed row lost";
pub const VERIFY_PASSES: &str = "engine verify passes";
pub const NO_INTERNAL_ERROR: &str = "no command ends in an internal error or a panic";
pub const NO_ANSWER_WITHOUT_PERSON: &str = "no answer sent without a person's act";
pub const NO_OWED_INTENT_LOST: &str = "no external or paid intent lost";
pub const NO_ACT_LOST: &str = "no committed person's act lost";
pub const LOST_ONLY_RERUNS_LOCAL: &str = "a lost intent only re-runs local work";
pub const NO_START_WHILE_HELD: &str = "a held task never starts an attempt while held";
pub const EXPIRED_NEVER_SPENT: &str = "an expired approval is never spent";
pub const RERUN_EXACT: &str = "a rerun re-runs exactly the chosen tasks and keeps the rest";
pub const STOP_CONSUMES_NO_ATTEMPT: &str = "a person's stop never consumes an attempt";

/// What a batch of events leaves the checks to look at once it is read.
#[derive(Default)]
struct Learnt {
    budgets_changed: bool,
    verdicts: Vec<Seq>,
    intents: Vec<(String, Option<Revision>)>,
    /// Each rerun (by its number): the tasks it made pending, its revision.
    reruns: BTreeMap<i64, (BTreeSet<String>, Option<Revision>)>,
    /// `max_attempts_per_task` stops: task, revision, event.
    exhausted: Vec<(String, Option<Revision>, Seq)>,
}

/// The ledger as the checks read it, and what they learnt of it so far.
pub struct Checker {
    store: PathBuf,
    goal: GoalId,
    reader: Option<Store>,
    commits_checked: u64,
    /// The last event seen: the log never goes back past it.
    seen: Seq,
    /// Each attempt's intent: its task and the event's position.
    intents: BTreeMap<AttemptId, (String, Seq)>,
    /// A person's acts on each task (approvals, settlements, retries,
    /// repairs, a stop that cancelled its call), by position; revisions
    /// act on every task.
    acts: BTreeMap<String, Vec<Seq>>,
    revisions: Vec<Seq>,
    /// The budgets in force (`None`: read them again).
    budgets: Option<Budgets>,
    /// Tries sent whose intents a power loss took (operation, try): their
    /// work may reach its provider again.
    replayed: BTreeSet<(String, i64)>,
    /// The holds in force as the ledger's events say, in their order: the
    /// goal's, and each task's.
    held_goal: bool,
    held: BTreeSet<String>,
    /// Before a person's rerun: the tasks then complete in the active
    /// revision. After its events: the tasks it must keep.
    complete_before_rerun: Option<BTreeSet<String>>,
    kept_by_rerun: BTreeSet<String>,
    /// What the plain run under way started on (`tools`, `cutoff`).
    run_start: Option<tools::AtStart>,
    cutoff_start: Option<cutoff::AtStart>,
    /// Which upstream completions each attempt was made from (`cutoff`).
    made: cutoff::Made,
    /// Dependants kept by early cutoff, and run again on an upstream's
    /// changed outputs, as the events say (how often the checks meet them).
    pub cutoffs: (u64, u64),
    pub findings: Vec<Finding>,
}

fn finding(invariant: &'static str, detail: String) -> Finding {
    Finding { invariant, detail }
}

/// The store, read as another process reads it (opened once it exists).
fn open<'a>(reader: &'a mut Option<Store>, path: &std::path::Path) -> Option<&'a Store> {
    if reader.is_none() {
        *reader = Store::open_ro(path).ok().flatten();
    }
    reader.as_ref()
}

impl Checker {
    pub fn new(store: PathBuf, goal: GoalId, made: cutoff::Made) -> Checker {
        Checker {
            store,
            goal,
            reader: None,
            commits_checked: 0,
            seen: Seq(0),
            intents: BTreeMap::new(),
            acts: BTreeMap::new(),
            revisions: Vec::new(),
            budgets: None,
            replayed: BTreeSet::new(),
            held_goal: false,
            held: BTreeSet::new(),
            complete_before_rerun: None,
            kept_by_rerun: BTreeSet::new(),
            run_start: None,
            cutoff_start: None,
            made,
            cutoffs: (0, 0),
            findings: Vec::new(),
        }
    }

    /// A person is about to ask for a rerun: what is complete now, which
    /// the rerun must keep unless it chose it.
    pub fn before_rerun(&mut self) {
        let goal = self.goal.clone();
        let mut found = Vec::new();
        self.learn(&mut found);
        self.findings.extend(found);
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let read = store.read();
        let Some(active) = read.goal(&goal).ok().flatten().map(|g| g.active_revision) else { return };
        let Ok(states) = read.task_states(&goal, active) else { return };
        self.complete_before_rerun =
            Some(states.into_iter().filter(|(_, s)| s.is_complete()).map(|(r, _)| r).collect());
    }

    /// A person is about to start a plain run (`act`: with
    /// `--reuse-across-tool-change`): the completions it starts on.
    pub fn before_run(&mut self, act: bool) {
        let mut found = Vec::new();
        self.learn(&mut found);
        self.findings.extend(found);
        let (goal, seen) = (self.goal.clone(), self.seen);
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        self.run_start = tools::at_start(store, &goal, seen, act);
        self.cutoff_start = cutoff::at_start(store, &goal, &self.made);
    }

    /// The plain run ended (`whole`: it was neither killed nor stopped
    /// by a signal): what it kept stood on its tool, or on a person's act,
    /// and on its upstreams' outputs, which are in the workspace.
    pub fn after_run(&mut self, whole: bool, traits: &BTreeMap<String, Traits>) -> Vec<Finding> {
        let (Some(start), Some(cut), true) = (self.run_start.take(), self.cutoff_start.take(), whole) else {
            return Vec::new();
        };
        let external = traits.iter().filter(|(_, t)| t.effect == "external").map(|(r, _)| r.clone()).collect();
        let goal = self.goal.clone();
        let Some(store) = open(&mut self.reader, &self.store) else { return Vec::new() };
        let deps = traits.iter().map(|(r, t)| (r.clone(), t.depends_on.clone())).collect();
        let mut out = tools::after_run(store, &goal, &start, (&external, &deps));
        out.extend(cutoff::after_run(store, &goal, (&cut, &self.made), traits));
        out
    }

    /// A call reached its provider: was it allowed to? `sent`: every call
    /// handed to a provider before it, `earlier`: those that reached one;
    /// `listed`: for an MCP tool call, did this engine process read its
    /// server's tools?
    pub fn delivered(
        &mut self,
        d: &Delivery,
        (sent, earlier): (&[Delivery], &[Delivery]),
        traits: &Traits,
        listed: Option<bool>,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        self.learn(&mut out);
        self.sent_again(d, sent, traits, listed, &mut out);
        let Some(store) = open(&mut self.reader, &self.store) else {
            out.push(finding(
                NO_SEND_WITHOUT_INTENT,
                format!("{} try {} sent before any store exists", d.op, d.try_no),
            ));
            return out;
        };
        intent_committed(store, d, &mut out);
        if let Some(answers) = &d.answers {
            answers_recorded(store, &self.goal, d, answers, &mut out);
        }
        if traits.paid || traits.effect == "external" || traits.approval {
            expired_not_spent(store, d, &mut out);
        }
        let Some(prev) = earlier.iter().rev().find(|e| e.task_ref == d.task_ref) else { return out };
        if traits.replayable() && self.replayed.contains(&(prev.op.clone(), prev.try_no)) {
            // Its intent was lost to a power loss: running it again is the rule.
            return out;
        }
        if traits.paid || traits.effect == "external" {
            repeat_approved(store, d, &mut out);
        }
        if traits.effect != "none" && !traits.idempotent {
            let since = self.intents.get(&prev.attempt).map_or(Seq(0), |(_, s)| *s);
            let acted = self.acts.get(&d.task_ref).is_some_and(|v| v.iter().any(|&s| s > since))
                || self.revisions.iter().any(|&s| s > since);
            not_blind(store, (d, prev), traits, acted, &mut out);
        }
        out
    }

    /// A try sent again (but for a replay of free local work whose intent a
    /// power loss took), or a tool call to a server whose tools were not read.
    fn sent_again(
        &self,
        d: &Delivery,
        sent: &[Delivery],
        traits: &Traits,
        listed: Option<bool>,
        out: &mut Vec<Finding>,
    ) {
        let replay = self.replayed.contains(&(d.op.clone(), d.try_no));
        if replay && !traits.replayable() {
            out.push(finding(
                LOST_ONLY_RERUNS_LOCAL,
                format!(
                    "{} try {} of {} ({} effect) was sent again after a power loss",
                    d.op, d.try_no, d.task_ref, traits.effect
                ),
            ));
        }
        if sent.iter().any(|e| e.op == d.op && e.try_no == d.try_no) && !(replay && traits.replayable()) {
            out.push(finding(ONE_TRY_ONCE, format!("{} try {} of {} was delivered again", d.op, d.try_no, d.task_ref)));
        }
        if listed == Some(false) {
            out.push(finding(
                NO_CALL_WITHOUT_INVENTORY,
                format!(
                    "{} try {} of {} was sent to a server whose tools/list could not be read",
                    d.op, d.try_no, d.task_ref
                ),
            ));
        }
    }

    /// Open the reader now, while the store is as its template left it,
    /// closed cleanly. Opened later, beside the simulated engine that holds
    /// the lease in this same process (so its holder reads as dead), the
    /// open checked the whole store first as `engine verify` does: about a
    /// tenth of a seed's time, for a result no check used (a reader that
    /// failed to open only skipped the checks; `engine verify` still runs
    /// after every crash and at the end).
    pub fn open_reader(&mut self) {
        let _ = open(&mut self.reader, &self.store);
    }

    /// The store's files are about to change under the reader (a power
    /// loss): close it.
    pub fn close(&mut self) {
        self.reader = None;
    }

    /// The power failed and the store went back to its last flush: every
    /// external or paid intent and every person's act seen must still be
    /// there; the tries of free `none`/`local` work whose intents were lost
    /// may be sent again. What was lost is forgotten.
    pub fn power_lost(&mut self, sends: &[Delivery], traits: &BTreeMap<String, Traits>) -> Vec<Finding> {
        let mut out = Vec::new();
        let Some(store) = open(&mut self.reader, &self.store) else { return out };
        let read = store.read();
        let last = read.events_since(Seq(0), i64::MAX).ok().and_then(|e| e.last().map(|e| e.seq)).unwrap_or(Seq(0));
        let replayable = |task: &str| traits.get(task).is_some_and(Traits::replayable);
        for (attempt, (task, seq)) in &self.intents {
            if *seq > last && !replayable(task) {
                out.push(finding(
                    NO_OWED_INTENT_LOST,
                    format!("the intent of attempt {attempt} of {task} (event {}) is gone", seq.0),
                ));
            }
        }
        for s in sends {
            let kept = read.attempt(s.attempt).is_ok_and(|a| a.operation_id.as_str() == s.op && a.try_no == s.try_no);
            match (kept, replayable(&s.task_ref)) {
                (true, _) => {}
                (false, true) => {
                    self.replayed.insert((s.op.clone(), s.try_no));
                }
                (false, false) => out.push(finding(
                    NO_OWED_INTENT_LOST,
                    format!("{} try {} of {} was sent, and its intent is gone", s.op, s.try_no, s.task_ref),
                )),
            }
        }
        let acts = self.acts.iter().flat_map(|(task, seqs)| seqs.iter().map(move |s| (task.as_str(), *s)));
        for (task, seq) in acts.chain(self.revisions.iter().map(|s| ("a revision", *s))) {
            if seq > last {
                out.push(finding(NO_ACT_LOST, format!("a person's act on {task} (event {}) is gone", seq.0)));
            }
        }
        drop(read);
        self.intents.retain(|_, (_, seq)| *seq <= last);
        self.made.power_lost(last);
        self.acts.values_mut().for_each(|v| v.retain(|s| *s <= last));
        self.revisions.retain(|s| *s <= last);
        self.seen = last;
        self.budgets = None;
        out
    }

    /// After a step: if anything was committed since the last look, the
    /// ledger's invariants.
    pub fn after_step(&mut self, _deliveries: &[Delivery]) -> Vec<Finding> {
        let commits = crate::failpoint::sim::commits();
        if commits == self.commits_checked {
            return Vec::new();
        }
        self.commits_checked = commits;
        let mut out = Vec::new();
        self.learn(&mut out);
        self.check_budgets(&mut out);
        out
    }

    /// Read the events committed since the last look; check each verdict
    /// and intent as it comes.
    fn learn(&mut self, out: &mut Vec<Finding>) {
        let goal = self.goal.clone();
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let read = store.read();
        if self.seen.0 > 0 && read.events_since(Seq(self.seen.0 - 1), 1).map(|e| e.is_empty()).unwrap_or(true) {
            out.push(finding(NO_ROW_LOST, format!("event {} was committed and is gone", self.seen.0)));
        }
        let Ok(events) = read.events_since(self.seen, 10_000) else { return };
        drop(read);
        let mut l = Learnt::default();
        for e in events {
            self.take(e, &mut l, out);
        }
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let read = store.read();
        for seq in l.verdicts {
            let unknown = read.attempts_in_state(&goal, AttemptState::EffectUnknown).map(|v| v.len()).unwrap_or(0);
            let in_doubt = read.attempts_in_doubt(&goal).map(|v| v.len()).unwrap_or(0);
            if unknown + in_doubt > 0 {
                out.push(finding(
                    NEVER_SATISFIED_OVER_UNKNOWN,
                    format!(
                        "the verdict at event {} is satisfied with {unknown} unknown and {in_doubt} in-doubt attempts",
                        seq.0
                    ),
                ));
            }
        }
        drop(read);
        if l.budgets_changed {
            self.budgets = None;
        }
        for (task, revision) in l.intents {
            self.check_attempts(&task, revision, out);
        }
        for (_, (chosen, revision)) in l.reruns {
            self.check_rerun(&chosen, revision, out);
        }
        for (task, revision, seq) in l.exhausted {
            self.check_stopped_attempts(&task, revision, seq, out);
        }
    }

    /// One event, in ledger order: what it changes of what the checks
    /// know, and what is to be looked at once the batch is read.
    fn take(&mut self, e: EventRecord, l: &mut Learnt, out: &mut Vec<Finding>) {
        self.seen = self.seen.max(e.seq);
        let task = e.task_ref.clone().unwrap_or_default();
        self.count_cutoff(&e);
        match e.kind {
            EventKind::IntentRecorded => self.intent(&e, task, l, out),
            EventKind::Held | EventKind::Released => {
                let on = e.kind == EventKind::Held;
                match (&e.task_ref, on) {
                    (None, _) => self.held_goal = on,
                    (Some(_), true) => {
                        self.held.insert(task);
                    }
                    (Some(_), false) => {
                        self.held.remove(&task);
                    }
                }
            }
            EventKind::RerunRequested => {
                let number = e.data.get("number").and_then(|n| n.as_i64()).unwrap_or_default();
                let entry = l.reruns.entry(number).or_default();
                entry.0.insert(task.clone());
                entry.1 = e.revision;
                self.acts.entry(task).or_default().push(e.seq);
            }
            EventKind::BudgetExhausted
                if e.data.get("budget").and_then(|b| b.as_str()) == Some("max_attempts_per_task") =>
            {
                l.exhausted.push((task, e.revision, e.seq));
            }
            EventKind::ApprovalRecorded
            | EventKind::Settled
            | EventKind::RetryRequested
            | EventKind::RepairRequested
            | EventKind::InputAnswered
            | EventKind::AttemptCancelled => self.acts.entry(task).or_default().push(e.seq),
            EventKind::RevisionRecorded => {
                self.revisions.push(e.seq);
                self.kept_by_rerun.clear();
                l.budgets_changed = true;
            }
            // A completion a changed tool made stale (or its dependants,
            // their upstream run again) runs on its own account, judged by
            // `tools`, not the rerun's.
            EventKind::CompletionStale if stale_on_its_own(&e.data) => {
                self.kept_by_rerun.remove(&task);
            }
            EventKind::BudgetRaised => l.budgets_changed = true,
            EventKind::RunFinished if e.data.get("goal_state").and_then(|s| s.as_str()) == Some("satisfied") => {
                l.verdicts.push(e.seq)
            }
            _ => {}
        }
    }

    /// An intent: its task is not held, nor kept by a rerun that did not
    /// choose it.
    fn intent(&mut self, e: &EventRecord, task: String, l: &mut Learnt, out: &mut Vec<Finding>) {
        if self.held_goal || self.held.contains(&task) {
            let whose = if self.held.contains(&task) { "it" } else { "its goal" };
            out.push(finding(
                NO_START_WHILE_HELD,
                format!("{task} started an attempt (event {}) while a person held {whose}", e.seq.0),
            ));
        }
        if self.kept_by_rerun.contains(&task) {
            out.push(finding(
                RERUN_EXACT,
                format!("{task} was complete and not chosen by the rerun, yet started an attempt (event {})", e.seq.0),
            ));
        }
        if let Some(a) = e.attempt_id {
            if let Some(store) = open(&mut self.reader, &self.store) {
                self.made.intent(store, &self.goal, (&task, a, e.seq));
            }
            self.intents.insert(a, (task.clone(), e.seq));
            l.intents.push((task, e.revision));
        }
    }

    /// A person's rerun made `chosen` pending: exactly the task it names
    /// and, with `--downstream`, its dependants by the recorded plan; the
    /// rest of what was complete is kept from now on.
    fn check_rerun(&mut self, chosen: &BTreeSet<String>, revision: Option<Revision>, out: &mut Vec<Finding>) {
        let goal = self.goal.clone();
        let before = self.complete_before_rerun.take().unwrap_or_default();
        let Some(revision) = revision else { return };
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let read = store.read();
        let asks = read.asks_of_goal(&goal).unwrap_or_default();
        let ask = asks.iter().rev().find(|a| {
            a.kind == crate::store::acts::AskKind::Rerun && a.task_ref.as_ref().is_some_and(|r| chosen.contains(r))
        });
        let Some(ask) = ask else { return };
        let named = ask.data.get("of").and_then(|o| o.as_str()).unwrap_or_default().to_string();
        let downstream = ask.data.get("downstream").and_then(|d| d.as_bool()).unwrap_or(false);
        let Some(file) =
            read.revision(&goal, revision).ok().and_then(|r| serde_json::from_str::<PlanFile>(&r.plan_json).ok())
        else {
            return;
        };
        let mut expected = BTreeSet::from([named.clone()]);
        let mut grew = downstream;
        while grew {
            grew = false;
            for t in &file.tasks {
                if !expected.contains(&t.task_ref) && t.depends_on.iter().any(|d| expected.contains(d)) {
                    expected.insert(t.task_ref.clone());
                    grew = true;
                }
            }
        }
        if &expected != chosen {
            out.push(finding(
                RERUN_EXACT,
                format!(
                    "`engine rerun {named}{}` made {chosen:?} run again; the plan says {expected:?}",
                    if downstream { " --downstream" } else { "" }
                ),
            ));
        }
        self.kept_by_rerun = before.difference(chosen).cloned().collect();
    }

    /// The run stopped on `max_attempts_per_task` for `task`: its attempts
    /// a person's stop did not cancel reach the limit in force.
    fn check_stopped_attempts(&mut self, task: &str, revision: Option<Revision>, seq: Seq, out: &mut Vec<Finding>) {
        let goal = self.goal.clone();
        let (Some(b), Some(revision)) = (self.budgets(), revision) else { return };
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let Ok(attempts) = store.read().attempts_of_task(&goal, task) else { return };
        let of_revision = attempts.iter().filter(|a| a.revision == revision);
        let cancelled = of_revision.clone().filter(|a| a.state == AttemptState::Cancelled).count();
        let counted = of_revision.count() - cancelled;
        if (counted as u64) < b.max_attempts_per_task as u64 {
            out.push(finding(
                STOP_CONSUMES_NO_ATTEMPT,
                format!(
                    "{task} stopped on max_attempts_per_task {} (event {}) with {counted} attempts in revision {revision} and {cancelled} a person's stop cancelled",
                    b.max_attempts_per_task, seq.0
                ),
            ));
        }
    }

    /// The budgets in force: the active revision's, raised by a person.
    fn budgets(&mut self) -> Option<Budgets> {
        if self.budgets.is_none() {
            let goal = self.goal.clone();
            let store = open(&mut self.reader, &self.store)?;
            let read = store.read();
            let active = read.goal(&goal).ok()??.active_revision;
            let file: PlanFile = serde_json::from_str(&read.revision(&goal, active).ok()?.plan_json).ok()?;
            let raises = crate::budgets::raises(&*read, &goal).ok()?;
            self.budgets = Some(crate::decide::raise::in_force(&file.budgets, &raises));
        }
        self.budgets.clone()
    }

    fn check_budgets(&mut self, out: &mut Vec<Finding>) {
        let goal = self.goal.clone();
        let Some(b) = self.budgets() else { return };
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let Ok(used) = store.read().budget_use(&goal) else { return };
        if used.calls > b.max_provider_calls {
            out.push(finding(
                BUDGETS_NEVER_PASSED,
                format!("{} provider calls, max_provider_calls {}", used.calls, b.max_provider_calls),
            ));
        }
        if used.cost > b.max_cost() {
            out.push(finding(BUDGETS_NEVER_PASSED, format!("cost {:?}, max_cost {}", used.cost, b.max_cost)));
        }
    }

    fn check_attempts(&mut self, task: &str, revision: Option<Revision>, out: &mut Vec<Finding>) {
        let goal = self.goal.clone();
        let (Some(b), Some(revision)) = (self.budgets(), revision) else { return };
        let Some(store) = open(&mut self.reader, &self.store) else { return };
        let Ok(n) = store.read().attempt_count(&goal, revision, task) else { return };
        if n > b.max_attempts_per_task as u64 {
            out.push(finding(
                BUDGETS_NEVER_PASSED,
                format!(
                    "{n} attempts of {task} in revision {revision}, max_attempts_per_task {}",
                    b.max_attempts_per_task
                ),
            ));
        }
    }

    /// After a command: the counters equal what they count.
    pub fn after_command(&mut self) -> Vec<Finding> {
        let goal = self.goal.clone();
        let Some(store) = open(&mut self.reader, &self.store) else { return Vec::new() };
        let read = store.read();
        match (read.budget_use(&goal), read.recount_budget_use(&goal)) {
            (Ok(kept), Ok(counted)) if kept != counted => {
                vec![finding(COUNTERS_EQUAL_ATTEMPTS, format!("counters {kept:?}, recounted {counted:?}"))]
            }
            _ => Vec::new(),
        }
    }
}

/// A `completion_stale` event's reason that no rerun gives: a changed tool,
/// an edited input, outputs missing here, or an upstream that runs again.
fn stale_on_its_own(data: &serde_json::Value) -> bool {
    matches!(
        data.get("stale").and_then(|r| r.as_str()),
        Some("TOOL_CHANGED" | "CHECKPOINT_CHANGED" | "OUTPUTS_MISSING" | "UPSTREAM_NOT_REUSED")
    )
}

impl Checker {
    /// Count a dependant kept by early cutoff, or run again on its
    /// upstream's changed outputs (the events' words: a tally, not a check).
    fn count_cutoff(&mut self, e: &EventRecord) {
        let said = |key: &str| e.data.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        match e.kind {
            EventKind::CompletionKept if said("kept") == "UPSTREAM_OUTPUT_UNCHANGED" => self.cutoffs.0 += 1,
            EventKind::CompletionStale if said("detail").contains("outputs changed") => self.cutoffs.1 += 1,
            _ => {}
        }
    }
}
