//! The core on its own, against a scripted fake port (as ninja tests its
//! `Plan` with a `FakeCommandRunner`): no ledger, no workspace, no process.
//! Each request is answered through its own reply from a script; the log
//! of what the core asked is what the invariants the simulator checks
//! (`tests/simulation`) are asserted on here, one test each, where the
//! core decides them:
//!
//! | invariant | here |
//! | --- | --- |
//! | no send without a committed intent; one try never sent twice | `every_call_goes_out_after_its_intent_is_committed…` |
//! | a held task never starts | `a_task_a_person_holds_never_starts…` |
//! | no re-send of an unknown outcome, nor after a restart | `an_operation_whose_outcome_is_unknown…`, `an_external_call_a_crash_left…` |
//! | a person's stop consumes no attempt (the call it ended is cancelled) | `a_persons_stop_cancels_a_call…` |
//! | an expired approval (or answer) is never spent | `a_call_whose_approval_or_answer_expired…` |
//! | an approval spent once: every call, a retry's too, goes through the gate | `an_approval_pays_for_one_call…` (the gate's spending modelled by the fake) |
//! | budgets never passed; a repeat waits for a person's approval | `a_call_over_budget…`, `a_call_awaiting_approval…` |
//! | no call to a server whose tools could not be read; no answers no person gave | `no_call_goes_to_a_server_whose_tools…` |
//!
//! The same invariants over seeded runs with crashes and power losses, the
//! core against an in-memory ledger model: `sim::core` (its checks' unit
//! tests need no SQLite either).
//!
//! Which approval a call spends and whether it has expired is the gate's
//! pure decision (`decide::gate` tests); the attempts a budget counts, the
//! store's.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use providers::{Captured, HttpReceipt, Outcome, Receipt};
use serde_json::json;

use super::{
    Action, Answered, Applied, Closing, Core, InDoubt, Level, Msg, Opened, Read, Record, Step, Verdict, Wake,
    WorldAction,
};
use super::{StopWait, StoppedAs, Write};
use crate::cost::Cost;
use crate::decide::budget::{BudgetName, Exhausted};
use crate::decide::gate::{Decision, Missing};
use crate::ids::{AttemptId, GoalId, OperationId, RequestDigest, Revision, Seq};
use crate::plan::{Effect, Plan, PlanFile};
use crate::run::asked::Asked;
use crate::run::constraints::Guard;
use crate::run::looked::Looked;
use crate::state::{AttemptKind, AttemptState, StopSignal, TaskState};
use crate::store::attempts::AttemptRecord;
use crate::store::attempts::Intent;
use crate::store::Claimed;

/// What the core asked, in order (the requests an invariant is about).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Gate(String),
    CommitGroup,
    Send(String, AttemptId),
    Receipt(AttemptId),
    /// The attempt's outcome recorded as nobody knows.
    Unknown(AttemptId),
    /// A person's stop ended the call: cancelled (`true`) or unknown.
    Stopped(String, bool),
}

/// How the fake world answers.
#[derive(Default)]
struct Script {
    states: HashMap<String, TaskState>,
    held: BTreeSet<String>,
    /// The gate's decision for a task's call (`Go` when absent).
    gate: HashMap<String, Decision>,
    /// Attempts a crashed engine left without a receipt (a restart).
    in_doubt: Vec<AttemptRecord>,
    /// A person's stop answers this signal check (counted from 1).
    stop_at: Option<usize>,
    /// Tasks whose every call needs a person's approval, with how many
    /// approvals are open for each (each call spends one: the gate's
    /// rule, modelled).
    approvals: HashMap<String, u32>,
    /// Tasks whose answer fails.
    fails: BTreeSet<String>,
    /// MCP servers whose `tools/list` cannot be read (the others list `act`).
    unlisted: BTreeSet<String>,
    /// A person's stop is answered by the call in flight, ended by the
    /// stop's signal: its answer was lost after the request left (no
    /// `dispatched` came before).
    lost_after_stop: bool,
}

struct Fake {
    script: Script,
    log: Vec<Seen>,
    next_id: i64,
    /// Calls handed over whose answer has not come yet.
    sent: VecDeque<AttemptId>,
    closing: Option<Closing>,
    /// The acceptance checks were started (their end is the next wake).
    accepting: bool,
    /// Each attempt as the ledger would hold it.
    attempts: HashMap<AttemptId, AttemptRecord>,
    /// How many times the core asked for a pending signal.
    signal_checks: usize,
    /// The tasks whose calls spent an approval, one entry a call.
    spent: Vec<String>,
    /// Each attempt's task, for its receipt's verdict.
    task_of: HashMap<AttemptId, String>,
    /// The calls that carried answers, by task.
    with_answers: Vec<String>,
    /// How the run ended: its error's code, if it ended on one.
    ended: Option<crate::error::Code>,
}

impl Fake {
    fn perform(&mut self, action: Action) -> Answered {
        match action {
            Action::Open(reply) => {
                let (states, held) = (self.script.states.clone(), self.script.held.clone());
                reply.send(Ok(Opened { states, held, now_ms: 0 }))
            }
            Action::Write(Write::CallStopped(stopped), reply) => {
                let cancelled = matches!(stopped.now, StoppedAs::Cancelled { .. });
                self.log.push(Seen::Stopped(stopped.attempt.task_ref.clone(), cancelled));
                reply.send(Ok(()))
            }
            Action::Write(_, reply) | Action::WriteLater(_, reply) | Action::Release(_, reply) => reply.send(Ok(())),
            Action::Materialize(_, reply) => reply.send(Ok(())),
            Action::Record(r) => self.record(r),
            Action::BeginGroup(reply) | Action::Forget(reply) => reply.send(()),
            Action::CommitGroup(reply) => {
                self.log.push(Seen::CommitGroup);
                reply.send(Ok(()))
            }
            Action::Read(r) => self.read(r),
            Action::Claim(_, reply) => reply.send(Ok(Claimed::Mine { generation: 1, took_over: None })),
            Action::Observe { reply, .. } => reply.send(Err("nothing observed in the fake".into())),
            Action::Cutoff { reply, .. } => reply.send(Ok(Err(json!({"stale": "FAKE"})))),
            Action::Baseline(_, _, reply) => reply.send(Ok(None)),
            Action::JudgeProtected { reply, .. } => reply.send(Ok(vec![])),
            Action::CollectOutputs(_, reply) => reply.send(None),
            Action::Refresh { reply, .. } => reply.send(Ok(vec![])),
            Action::World(w) => self.world(w),
            Action::Finish(closing, reply) | Action::ReportJudged(closing, reply) => {
                self.closing = Some(*closing);
                reply.send(Err(crate::error::Error::internal("the fake writes no report")))
            }
        }
    }

    fn record(&mut self, r: Record) -> Answered {
        match r {
            Record::RunStarted { reply, .. } => reply.send(Ok(Seq(1))),
            Record::Gate(call, reply) => {
                self.log.push(Seen::Gate(call.task_ref.clone()));
                let open = self.script.approvals.get_mut(&call.task_ref);
                let approved = match open {
                    Some(0) => Some(false),
                    Some(n) => {
                        *n -= 1;
                        self.spent.push(call.task_ref.clone());
                        Some(true)
                    }
                    None => None,
                };
                let applied = match (self.script.gate.get(&call.task_ref), approved) {
                    (Some(decision), _) => Applied::Stopped(decision.clone()),
                    (None, Some(false)) => Applied::Stopped(Decision::AwaitApproval(Missing::None)),
                    (None, _) => {
                        self.next_id += 1;
                        let id = AttemptId(self.next_id);
                        self.attempts.insert(id, attempt(id, &call.task_ref, AttemptState::IntentRecorded));
                        self.task_of.insert(id, call.task_ref.clone());
                        Applied::Go { intent: Intent::for_test(id), try_no: 1 }
                    }
                };
                reply.send(Ok(applied))
            }
            Record::Receipt(r, reply) => {
                self.log.push(Seen::Receipt(r.attempt_id));
                let fails = self.task_of.get(&r.attempt_id).is_some_and(|t| self.script.fails.contains(t));
                reply.send(Ok((if fails { Verdict::Failed } else { Verdict::Succeeded }, None)))
            }
            Record::Unknown { attempt_id, reply, .. } => {
                self.log.push(Seen::Unknown(attempt_id));
                let row = self.attempts.get(&attempt_id).cloned();
                let row = row.map(|a| Box::new(AttemptRecord { state: AttemptState::EffectUnknown, ..a }));
                reply.send(row.ok_or_else(|| crate::error::Error::internal("no such attempt in the fake")))
            }
            Record::Validations(_, reply) => reply.send(Ok(vec![])),
            Record::Acceptance(_, reply) => reply.send(Ok(vec![])),
            Record::CompletedFromReadBack(_, reply) => {
                reply.send(Err(crate::error::Error::internal("no read-back in the fake")))
            }
        }
    }

    fn read(&mut self, r: Read) -> Answered {
        match r {
            Read::Raises(reply) => reply.send(Ok(vec![])),
            Read::InDoubt(reply) => {
                let attempts = std::mem::take(&mut self.script.in_doubt);
                for a in &attempts {
                    self.attempts.insert(a.id, a.clone());
                }
                reply.send(Ok(InDoubt { skip: Default::default(), attempts }))
            }
            Read::Unjudged { reply, .. } => reply.send(Ok(vec![])),
            Read::Attempt(id, reply) => {
                let row = self.attempts.get(&id).cloned();
                reply.send(row.ok_or_else(|| crate::error::Error::internal("no such attempt in the fake")))
            }
            Read::AttemptsOf(_, reply) | Read::SettledNotRun(reply) => reply.send(Ok(vec![])),
            Read::WaitedTrySettled(_, reply) => reply.send(Ok(false)),
            Read::Tasks(reply) => reply.send(Ok(self.script.states.clone().into_iter().collect())),
            Read::HeldElsewhere(reply) => reply.send(Ok(Default::default())),
            Read::TaskNow(task_ref, reply) => reply.send(Ok(self.script.states.get(&task_ref).copied())),
            Read::FinishedSince(_, reply) => reply.send(Ok(false)),
        }
    }

    fn world(&mut self, w: WorldAction) -> Answered {
        match w {
            WorldAction::ListTools(named, reply) => reply.send(self.list_tools(named)),
            WorldAction::Send(call, reply) => {
                self.log.push(Seen::Send(call.task_ref.clone(), call.attempt_id));
                if call.answers.is_some() {
                    self.with_answers.push(call.task_ref.clone());
                }
                self.sent.push_back(call.attempt_id);
                reply.send(())
            }
            WorldAction::Look { reply, .. } => reply.send(Looked::nothing()),
            WorldAction::LookSuperseded { reply, .. } => {
                reply.send(Err(crate::error::Error::internal("no earlier revision in the fake")))
            }
            WorldAction::Cancel(_, reply) | WorldAction::Validate(_, reply) => reply.send(()),
            WorldAction::Abort(_, reply) | WorldAction::AbortAccept(reply) => reply.send(()),
            WorldAction::Accept { reply, .. } => {
                self.accepting = true;
                reply.send(())
            }
            // A person's stop: the grace ends before any answer comes, or
            // the call answers that its answer was lost.
            WorldAction::Wait(wait, reply) if !matches!(wait.stop, StopWait::Signal | StopWait::Nothing) => {
                match (self.script.lost_after_stop, self.sent.pop_front()) {
                    (true, Some(attempt_id)) => {
                        let reason = providers::LostReason::ResponseLost;
                        let outcome = Box::new(Outcome::Lost { reason, detail: "cut off".into() });
                        reply.send(Wake::Message(Msg::Finished { attempt_id, outcome, level: Level::Term }))
                    }
                    _ => reply.send(Wake::Timer),
                }
            }
            WorldAction::Wait(_, reply) => reply.send(self.next_answer()),
            WorldAction::TryMessage(reply) => reply.send(None),
            WorldAction::SignalPending(reply) => {
                self.signal_checks += 1;
                let stop = self.script.stop_at == Some(self.signal_checks);
                reply.send(stop.then_some(StopSignal::Interrupt))
            }
            WorldAction::SignalGroups { reply, .. } => reply.send(0),
            WorldAction::Say(_, reply) | WorldAction::Crashpoint(_, reply) => reply.send(()),
            WorldAction::Ended { reply, .. } => reply.send(Ok(())),
        }
    }

    /// Each named server's tools (`act`), or why they could not be read.
    fn list_tools(&self, named: BTreeSet<String>) -> super::Listed {
        let inventory = || crate::decide::tools::Inventory {
            server: None,
            protocol: "2025-06-18".into(),
            tools: [("act".to_string(), "schema".to_string())].into(),
            annotations: BTreeMap::new(),
            digest: "fake".into(),
        };
        named
            .into_iter()
            .map(|p| match self.script.unlisted.contains(&p) {
                true => (p, Err("the fake server did not answer".to_string())),
                false => (p, Ok(inventory())),
            })
            .collect()
    }

    /// The oldest call in flight answers `200`; then the acceptance checks
    /// end (none declared); with neither, the channel closed.
    fn next_answer(&mut self) -> Wake {
        let Some(attempt_id) = self.sent.pop_front() else {
            return match std::mem::take(&mut self.accepting) {
                true => Wake::Accepted(Some((vec![], vec![]))),
                false => Wake::Closed,
            };
        };
        let receipt = HttpReceipt {
            status: 200,
            retry_after_seconds: None,
            body: Captured::default(),
            duration_ms: 1,
            body_cut: None,
            version: None,
        };
        let outcome = Box::new(Outcome::Received(Receipt::Http(receipt)));
        Wake::Message(Msg::Finished { attempt_id, outcome, level: Level::None })
    }
}

/// A plan of `tasks` (`(ref, depends_on)`), each an HTTP call with an
/// external effect and no validations.
fn plan(tasks: &[(&str, &[&str])]) -> Plan {
    let tasks: Vec<_> = tasks
        .iter()
        .map(|(r, deps)| match r.starts_with('M') {
            // A task named M… calls the tool `act` of the MCP server `tools`.
            true => json!({"ref": r, "title": format!("task {r}"), "provider": "tools", "effect": "external",
                           "action": {"tool": "act", "arguments": {"task": r}}, "depends_on": deps}),
            false => json!({"ref": r, "title": format!("task {r}"), "provider": "api", "effect": "external",
                            "action": {"body": {"task": r}}, "depends_on": deps}),
        })
        .collect();
    let file = json!({
        "version": 1,
        "goal": {"id": "core-alone", "statement": "the core, tested alone", "acceptance": []},
        "budgets": {"max_attempts_per_task": 3, "max_provider_calls": 10, "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"api": {"kind": "http", "endpoint": "http://127.0.0.1:9/fake"},
                      "tools": {"kind": "mcp", "command": ["fake-tools"]}},
        "tasks": tasks,
    });
    let file: PlanFile = serde_json::from_value(file).expect("the test's plan parses");
    Plan::from_file(file, std::env::temp_dir()).expect("the test's plan is valid")
}

/// Step the core against the fake until the run ends.
fn run(plan: &Plan, mut script: Script) -> Fake {
    for t in &plan.file.tasks {
        script.states.entry(t.task_ref.clone()).or_insert(TaskState::Pending);
    }
    let fake = Fake {
        script,
        log: vec![],
        next_id: 0,
        sent: VecDeque::new(),
        closing: None,
        accepting: false,
        attempts: HashMap::new(),
        signal_checks: 0,
        spent: vec![],
        task_of: HashMap::new(),
        with_answers: vec![],
        ended: None,
    };
    run_again(plan, fake, Asked::default())
}

/// Step a new run of the core (a new engine process: `asked`, what a
/// person asked of it) against what `fake` holds until it ends.
fn run_again(plan: &Plan, mut fake: Fake, asked: Asked) -> Fake {
    let mut core = Core::new(plan, Revision(1), 2, asked, false, Guard::default());
    for _ in 0..10_000 {
        match core.resume() {
            Step::Done(ended) => {
                fake.ended = ended.err().map(|e| e.code);
                return fake;
            }
            Step::Act(action) => {
                let _answered = fake.perform(action);
            }
        }
    }
    panic!("the run did not end in 10,000 requests; it asked: {:?}", fake.log)
}

/// Attempt `id` of `task`, as the ledger would hold it: an external call
/// of the plan's first revision, in `state`.
fn attempt(id: AttemptId, task: &str, state: AttemptState) -> AttemptRecord {
    AttemptRecord {
        id,
        goal_id: GoalId::new("core-alone"),
        revision: Revision(1),
        task_ref: task.to_string(),
        operation_id: OperationId::new(format!("op-{task}")),
        try_no: 1,
        kind: AttemptKind::Run,
        request_digest: RequestDigest::new(format!("request-{task}")),
        effect: Effect::External,
        cost: Cost::ZERO,
        state,
        generation: 1,
        intent_at_ms: 0,
        dispatched_at_ms: (state != AttemptState::IntentRecorded).then_some(1),
        dispatch_detail: None,
        finished_at_ms: None,
        classification: None,
        unknown_reason: None,
        reusable: None,
        checkpoint: None,
        inputs_at_intent: None,
        instruction: None,
        sandbox: None,
        handle: None,
        handle_at_ms: None,
        protected_at_intent: None,
    }
}

fn gated(fake: &Fake, task: &str) -> bool {
    fake.log.contains(&Seen::Gate(task.to_string()))
}

fn sent(fake: &Fake, task: &str) -> bool {
    fake.log.iter().any(|s| matches!(s, Seen::Send(t, _) if t == task))
}

#[test]
fn every_call_goes_out_after_its_intent_is_committed_and_a_dependant_after_its_receipt() {
    let fake = run(&plan(&[("T1", &[]), ("T2", &["T1"])]), Script::default());
    for (i, seen) in fake.log.iter().enumerate() {
        let Seen::Send(task, _) = seen else { continue };
        let gate = fake.log.iter().position(|s| *s == Seen::Gate(task.clone())).expect("a call without a gate");
        let commit = fake.log[gate..i].iter().any(|s| *s == Seen::CommitGroup);
        assert!(commit, "{task}'s call went out before its intent's commit: {:?}", fake.log);
    }
    assert!(sent(&fake, "T1") && sent(&fake, "T2"), "{:?}", fake.log);
    let t2 = fake.log.iter().position(|s| *s == Seen::Gate("T2".into())).expect("T2 gated");
    let t1_receipt = fake.log.iter().position(|s| matches!(s, Seen::Receipt(_))).expect("T1's receipt");
    assert!(t1_receipt < t2, "T2 started before T1's receipt: {:?}", fake.log);
    // Each call was handed over once.
    let sends = fake.log.iter().filter(|s| matches!(s, Seen::Send(..))).count();
    assert_eq!(sends, 2, "{:?}", fake.log);
}

#[test]
fn a_task_a_person_holds_never_starts_nor_do_its_dependants() {
    let script = Script { held: ["T1".to_string()].into(), ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &["T1"]), ("T3", &[])]), script);
    assert!(!gated(&fake, "T1") && !gated(&fake, "T2"), "{:?}", fake.log);
    assert!(sent(&fake, "T3"), "the task nobody holds runs: {:?}", fake.log);
}

#[test]
fn an_operation_whose_outcome_is_unknown_is_never_sent_again() {
    let script = Script { states: [("T1".to_string(), TaskState::EffectUnknown)].into(), ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &[])]), script);
    assert!(!gated(&fake, "T1") && !sent(&fake, "T1"), "{:?}", fake.log);
    assert!(sent(&fake, "T2"), "{:?}", fake.log);
}

#[test]
fn a_call_over_budget_is_not_sent_and_no_new_work_starts() {
    let exhausted =
        Exhausted { budget: BudgetName::MaxProviderCalls, used: 10.0, limit: 10.0, requested: 1.0, detail: None };
    let script = Script { gate: [("T1".to_string(), Decision::Budget(exhausted))].into(), ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &[])]), script);
    assert!(!sent(&fake, "T1") && !gated(&fake, "T2"), "{:?}", fake.log);
    let closing = fake.closing.expect("the run ends on its verdict");
    assert!(closing.budget.is_some_and(|b| b.budget == BudgetName::MaxProviderCalls));
}

#[test]
fn a_call_awaiting_approval_is_not_sent_and_waits_for_a_person() {
    let script =
        Script { gate: [("T1".to_string(), Decision::AwaitApproval(Missing::None))].into(), ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &["T1"])]), script);
    assert!(!sent(&fake, "T1") && !gated(&fake, "T2"), "{:?}", fake.log);
    let closing = fake.closing.expect("the run ends on its verdict");
    assert_eq!(closing.awaiting.iter().map(|a| a.task_ref.as_str()).collect::<Vec<_>>(), ["T1"]);
}

#[test]
fn a_request_left_unanswered_ends_the_run_with_an_error_never_a_made_up_answer() {
    let plan = plan(&[("T1", &[])]);
    let mut core = Core::new(&plan, Revision(1), 1, Asked::default(), false, Guard::default());
    let Step::Act(Action::Open(_unanswered)) = core.resume() else { panic!("the run opens first") };
    match core.resume() {
        Step::Done(Err(e)) => assert!(e.message.contains("unanswered"), "{}", e.message),
        other => panic!("the run went on without an answer: {other:?}"),
    }
}

#[test]
fn an_external_call_a_crash_left_without_an_answer_is_never_sent_again_after_a_restart() {
    // T1's call went out before the engine died; nothing says what it did.
    let script = Script {
        states: [("T1".to_string(), TaskState::Running)].into(),
        in_doubt: vec![attempt(AttemptId(7), "T1", AttemptState::Dispatched)],
        ..Script::default()
    };
    let fake = run(&plan(&[("T1", &[]), ("T2", &[]), ("T3", &["T1"])]), script);
    assert!(fake.log.contains(&Seen::Unknown(AttemptId(7))), "its outcome is unknown: {:?}", fake.log);
    assert!(!gated(&fake, "T1") && !sent(&fake, "T1"), "T1 was sent again blindly: {:?}", fake.log);
    assert!(!gated(&fake, "T3"), "a dependant of an unknown outcome started: {:?}", fake.log);
    assert!(sent(&fake, "T2"), "the rest of the run goes on: {:?}", fake.log);
    let closing = fake.closing.expect("the run ends on its verdict");
    assert_eq!(closing.unknown.iter().map(|u| u.operation_id.as_str()).collect::<Vec<_>>(), ["op-T1"]);
}

#[test]
fn a_persons_stop_cancels_a_call_that_never_went_out_and_starts_nothing_new() {
    // The stop comes at the second look for a signal: T1's intent is
    // committed, its call handed over but never written (no `dispatched`).
    let script = Script { stop_at: Some(2), ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &["T1"]), ("T3", &["T1"])]), script);
    assert!(sent(&fake, "T1"), "{:?}", fake.log);
    assert!(fake.log.contains(&Seen::Stopped("T1".into(), true)), "T1's call not cancelled: {:?}", fake.log);
    assert!(!fake.log.iter().any(|s| matches!(s, Seen::Receipt(_) | Seen::Unknown(_))), "{:?}", fake.log);
    assert!(!gated(&fake, "T2") && !gated(&fake, "T3"), "new work after a person's stop: {:?}", fake.log);
    let closing = fake.closing.expect("the run ends on its verdict");
    assert_eq!(closing.signal, Some(StopSignal::Interrupt));
}

#[test]
fn an_external_call_whose_provider_says_it_had_the_request_is_never_cancelled_by_a_stop() {
    // As above, but the stopped call answers that its answer was lost
    // after the request left, though no `dispatched` was recorded before
    // the stop: nobody can tell what it did, so it is unknown (a person
    // settles it), not `cancelled` (which a next run would send again).
    let script = Script { stop_at: Some(2), lost_after_stop: true, ..Script::default() };
    let fake = run(&plan(&[("T1", &[]), ("T2", &["T1"])]), script);
    assert!(sent(&fake, "T1"), "{:?}", fake.log);
    assert!(fake.log.contains(&Seen::Stopped("T1".into(), false)), "T1 called cancelled: {:?}", fake.log);
    assert!(!gated(&fake, "T2"), "new work after a person's stop: {:?}", fake.log);
}

#[test]
fn a_call_whose_approval_or_answer_expired_is_never_sent() {
    let expired = Missing::Expired { approval_id: crate::ids::ApprovalId(3), at_ms: 5 };
    let gate = [
        ("T1".to_string(), Decision::AwaitApproval(expired)),
        ("T2".to_string(), Decision::AnswerExpired { ask_id: 4, at_ms: 5 }),
    ];
    let fake =
        run(&plan(&[("T1", &[]), ("T2", &[]), ("T3", &["T1"])]), Script { gate: gate.into(), ..Script::default() });
    assert!(gated(&fake, "T1") && gated(&fake, "T2"), "{:?}", fake.log);
    assert!(!sent(&fake, "T1") && !sent(&fake, "T2") && !gated(&fake, "T3"), "{:?}", fake.log);
    let closing = fake.closing.expect("the run ends on its verdict");
    let awaiting: Vec<_> = closing.awaiting.iter().map(|a| a.task_ref.as_str()).collect();
    assert_eq!(awaiting, ["T1"], "the expired approval's call waits for a fresh one");
}

#[test]
fn an_approval_pays_for_one_call_and_a_retry_waits_for_another() {
    let script =
        Script { approvals: [("T1".to_string(), 1)].into(), fails: ["T1".to_string()].into(), ..Script::default() };
    let plan = plan(&[("T1", &[])]);
    let mut fake = run(&plan, script);
    assert_eq!(fake.spent, ["T1"], "{:?}", fake.log);
    assert!(sent(&fake, "T1"), "{:?}", fake.log);
    // T1 failed; a person asks for a retry (`engine retry T1` makes it
    // pending again): the next call of T1 goes to the gate again, and with
    // no approval left it waits.
    fake.script.states.insert("T1".into(), TaskState::Pending);
    fake.log.clear();
    let op = plan.digests().tasks.get("T1").map(|d| d.operation_id.clone()).expect("T1's operation");
    let fake = run_again(&plan, fake, Asked { retry: [op].into(), ..Asked::default() });
    assert!(gated(&fake, "T1"), "the retry never asked the gate: {:?}", fake.log);
    assert!(!sent(&fake, "T1"), "a spent approval paid for a second call: {:?}", fake.log);
    assert_eq!(fake.spent, ["T1"], "one approval, spent once");
    let closing = fake.closing.expect("the run ends on its verdict");
    assert_eq!(closing.awaiting.iter().map(|a| a.task_ref.as_str()).collect::<Vec<_>>(), ["T1"]);
}

#[test]
fn no_call_goes_to_a_server_whose_tools_could_not_be_read_and_none_carries_answers_no_person_gave() {
    let plan = plan(&[("M1", &[]), ("T2", &[])]);
    // Its tools listed: the tool call goes out, carrying no answers.
    let fake = run(&plan, Script::default());
    assert!(sent(&fake, "M1") && sent(&fake, "T2"), "{:?}", fake.log);
    assert!(fake.with_answers.is_empty(), "answers no person gave: {:?}", fake.with_answers);
    // Its server's tools could not be read: the run stops before any intent.
    let fake = run(&plan, Script { unlisted: ["tools".to_string()].into(), ..Script::default() });
    assert!(!gated(&fake, "M1") && !gated(&fake, "T2"), "{:?}", fake.log);
    assert_eq!(fake.ended, Some(crate::error::Code::ToolInventoryUnavailable));
}
