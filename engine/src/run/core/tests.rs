//! The core on its own, against a scripted fake port (as ninja tests its
//! `Plan` with a `FakeCommandRunner`): no ledger, no workspace, no process.
//! Each request is answered through its own reply from a script; the log
//! of what the core asked is what the invariants the simulator checks
//! (`tests/simulation`) are asserted on here, one test each.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use providers::{Captured, HttpReceipt, Outcome, Receipt};
use serde_json::json;

use super::{
    Action, Answered, Applied, Closing, Core, InDoubt, Level, Msg, Opened, Read, Record, Step, Verdict, Wake,
    WorldAction,
};
use crate::decide::budget::{BudgetName, Exhausted};
use crate::decide::gate::{Decision, Missing};
use crate::ids::{AttemptId, Revision, Seq};
use crate::plan::{Plan, PlanFile};
use crate::run::asked::Asked;
use crate::run::constraints::Guard;
use crate::run::looked::Looked;
use crate::state::TaskState;
use crate::store::attempts::Intent;
use crate::store::Claimed;

/// What the core asked, in order (the requests an invariant is about).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Gate(String),
    CommitGroup,
    Send(String, AttemptId),
    Receipt(AttemptId),
}

/// How the fake world answers.
#[derive(Default)]
struct Script {
    states: HashMap<String, TaskState>,
    held: BTreeSet<String>,
    /// The gate's decision for a task's call (`Go` when absent).
    gate: HashMap<String, Decision>,
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
}

impl Fake {
    fn perform(&mut self, action: Action) -> Answered {
        match action {
            Action::Open(reply) => {
                let (states, held) = (self.script.states.clone(), self.script.held.clone());
                reply.send(Ok(Opened { states, held, now_ms: 0 }))
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
            Action::Baseline(_, reply) => reply.send(Ok(None)),
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
                let applied = match self.script.gate.get(&call.task_ref) {
                    Some(decision) => Applied::Stopped(decision.clone()),
                    None => {
                        self.next_id += 1;
                        Applied::Go { intent: Intent::for_test(AttemptId(self.next_id)), try_no: 1 }
                    }
                };
                reply.send(Ok(applied))
            }
            Record::Receipt(r, reply) => {
                self.log.push(Seen::Receipt(r.attempt_id));
                reply.send(Ok((Verdict::Succeeded, None)))
            }
            Record::Unknown { reply, .. } => reply.send(Err(crate::error::Error::internal("no unknown in the fake"))),
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
            Read::InDoubt(reply) => reply.send(Ok(InDoubt { skip: Default::default(), attempts: vec![] })),
            Read::Unjudged { reply, .. } => reply.send(Ok(vec![])),
            Read::Attempt(_, reply) => reply.send(Err(crate::error::Error::internal("no attempt rows in the fake"))),
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
            WorldAction::ListTools(_, reply) => reply.send(BTreeMap::new()),
            WorldAction::Send(call, reply) => {
                self.log.push(Seen::Send(call.task_ref.clone(), call.attempt_id));
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
            WorldAction::Wait(_, reply) => reply.send(self.next_answer()),
            WorldAction::TryMessage(reply) => reply.send(None),
            WorldAction::SignalPending(reply) => reply.send(None),
            WorldAction::SignalGroups { reply, .. } => reply.send(0),
            WorldAction::Say(_, reply) | WorldAction::Crashpoint(_, reply) => reply.send(()),
            WorldAction::Ended { reply, .. } => reply.send(Ok(())),
        }
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
        .map(|(r, deps)| {
            json!({"ref": r, "title": format!("task {r}"), "provider": "api", "effect": "external",
                   "action": {"body": {"task": r}}, "depends_on": deps})
        })
        .collect();
    let file = json!({
        "version": 1,
        "goal": {"id": "core-alone", "statement": "the core, tested alone", "acceptance": []},
        "budgets": {"max_attempts_per_task": 3, "max_provider_calls": 10, "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"api": {"kind": "http", "endpoint": "http://127.0.0.1:9/fake"}},
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
    let mut fake = Fake { script, log: vec![], next_id: 0, sent: VecDeque::new(), closing: None, accepting: false };
    let mut core = Core::new(plan, Revision(1), 2, Asked::default(), false, Guard::default());
    for _ in 0..10_000 {
        match core.resume() {
            Step::Done(_) => return fake,
            Step::Act(action) => {
                let _answered = fake.perform(action);
            }
        }
    }
    panic!("the run did not end in 10,000 requests; it asked: {:?}", fake.log)
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
