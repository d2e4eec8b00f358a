//! The core's port, answered by the models: each ledger request by the
//! in-memory ledger (`ledger`), each world request by the seeded world
//! (`world`), the workspace's as a workspace where nothing is observed or
//! protected. The invariants are checked as each request is performed
//! (`checks`). The gate's decision is `decide::gate`'s over the modelled
//! ledger's facts, each transaction's durability `decide::durability`'s:
//! the model decides nothing the driver's pure rules decide.

use std::collections::BTreeMap;

use serde_json::json;

use crate::decide::durability::{self, Stakes};
use crate::decide::gate::{self, ApprovalFacts, Decision};
use crate::error::{Error, Result};
use crate::ids::{Revision, Seq};
use crate::plan::Plan;
use crate::run::core::{
    Action, Answered, Applied, GateCall, InDoubt, Opened, Read, Record, Verdict, WorldAction, Write,
};
use crate::sim::plan::Traits;
use crate::state::{AttemptState, TaskState};
use crate::store::{Claimed, Durability};

use super::checks::{Checker, Delivery, How};
use super::ledger::{self, Ledger, State};
use super::world::World;

/// Lines of a seed's story kept.
const TRACE_LINES: usize = 80;

/// Everything outside the core, modelled.
pub struct Model<'p> {
    pub plan: &'p Plan,
    pub traits: &'p BTreeMap<String, Traits>,
    pub ledger: Ledger,
    pub world: World,
    pub checks: Checker,
    /// The run reached its verdict's request (this process).
    pub finished: bool,
    /// Requests performed, calls handed over.
    pub requests: u64,
    pub sends: u64,
    pub trace: Vec<String>,
}

impl<'p> Model<'p> {
    pub fn new(plan: &'p Plan, traits: &'p BTreeMap<String, Traits>, ledger: Ledger, world: World) -> Model<'p> {
        let checks = Checker::default();
        Model { plan, traits, ledger, world, checks, finished: false, requests: 0, sends: 0, trace: Vec::new() }
    }

    pub fn tell(&mut self, line: String) {
        if self.trace.len() == TRACE_LINES {
            self.trace.remove(0);
        }
        self.trace.push(line);
    }

    fn traits(&self, task_ref: &str) -> Traits {
        self.traits.get(task_ref).cloned().unwrap_or_else(|| Traits {
            effect: "external",
            idempotent: false,
            paid: false,
            observable: false,
            mcp: false,
            handles: false,
            flaky: 0,
            passes: 100,
            timeout_ms: None,
            approval: false,
            depends_on: Vec::new(),
            input: false,
            output: false,
        })
    }

    fn stakes(&self, task_ref: &str) -> Option<Stakes> {
        self.plan.task(task_ref).map(Stakes::of_task)
    }

    /// Is re-sending `task_ref`'s work safe (effect `none`, or idempotent)?
    fn safe(&self, task_ref: &str) -> bool {
        self.plan.task(task_ref).is_some_and(|t| t.safe_to_resend())
    }

    /// Perform one request and answer it.
    pub fn perform(&mut self, action: Action) -> Answered {
        self.requests += 1;
        match action {
            Action::Open(reply) => {
                let s = self.ledger.current();
                let states = s.tasks.iter().map(|(r, t)| (r.clone(), *t)).collect();
                reply.send(Ok(Opened { states, held: s.held.clone(), now_ms: 0 }))
            }
            Action::Write(w, reply) => reply.send(self.write(w)),
            Action::WriteLater(d, reply) => reply.send(self.write(Write::Dispatched(d))),
            Action::Record(r) => self.record(r),
            Action::BeginGroup(reply) => {
                self.ledger.begin_group();
                reply.send(())
            }
            Action::CommitGroup(reply) => {
                self.ledger.commit_group();
                reply.send(Ok(()))
            }
            Action::Read(r) => self.read(r),
            Action::Claim(_, reply) => reply.send(Ok(Claimed::Mine { generation: 1, took_over: None })),
            Action::Release(_, reply) | Action::Materialize(_, reply) => reply.send(Ok(())),
            Action::Observe { reply, .. } => reply.send(Err("the model observes no workspace".into())),
            Action::Cutoff { reply, .. } => reply.send(Ok(Err(json!({"stale": "MODEL"})))),
            Action::Baseline(_, _, reply) => reply.send(Ok(None)),
            Action::JudgeProtected { reply, .. } => reply.send(Ok(Vec::new())),
            Action::CollectOutputs(_, reply) => reply.send(None),
            Action::Refresh { reply, .. } => reply.send(Ok(Vec::new())),
            Action::Forget(reply) => reply.send(()),
            Action::World(w) => self.world(w),
            Action::Finish(_, reply) | Action::ReportJudged(_, reply) => {
                self.finished = true;
                reply.send(Err(Error::internal("the model writes no report")))
            }
        }
    }

    /// One of the core's writes whose answer is only that it committed,
    /// at the durability the driver's `ledger.rs` gives it.
    fn write(&mut self, w: Write) -> Result<()> {
        match w {
            Write::Event { durability, .. } => self.ledger.write(durability, true, |_| ()),
            Write::TaskState { task_ref, state, .. } => self.ledger.write(Durability::Normal, true, |s| {
                s.tasks.insert(task_ref, state);
            }),
            Write::Handle { attempt_id, handle, .. } => self.ledger.write(Durability::Full, true, |s| {
                if let Some(a) = s.attempts.get_mut(&attempt_id) {
                    a.handle = Some(handle);
                }
            }),
            Write::Dispatched(d) => self.ledger.write(Durability::Normal, true, |s| {
                if s.attempts.get(&d.attempt_id).is_some_and(|a| a.state == AttemptState::IntentRecorded) {
                    ledger::settle(s, d.attempt_id, AttemptState::Dispatched, None);
                }
            }),
            Write::Failed { attempt_id, task_ref, durability, never_dispatched, .. } => {
                if !never_dispatched {
                    self.resolve(attempt_id, How::Failed);
                }
                let durability = self.stakes(&task_ref).map_or(durability, |s| durability::for_write(durability, s));
                self.ledger.write(durability, true, |s| {
                    ledger::settle(s, attempt_id, AttemptState::Failed, Some(TaskState::Failed));
                });
            }
            Write::ObservedReceipt { attempt, .. } => {
                self.resolve(attempt.id, How::Observed);
                self.ledger.write(Durability::Full, true, |s| {
                    ledger::settle(s, attempt.id, AttemptState::ReceiptRecorded, None);
                });
            }
            Write::Abandon { attempt, .. } => {
                self.resolve(attempt.id, How::Abandoned);
                self.tell(format!("attempt {} of {} abandoned for a new try", attempt.id, attempt.task_ref));
                self.ledger.write(Durability::Full, true, |s| {
                    ledger::settle(s, attempt.id, AttemptState::Abandoned, Some(TaskState::Pending));
                });
            }
            Write::CallStopped(stopped) => {
                let (id, now) = (stopped.attempt.id, stopped.now);
                self.ledger.write(Durability::Full, true, |s| match now {
                    crate::run::core::StoppedAs::Unknown(_) => {
                        ledger::settle(s, id, AttemptState::EffectUnknown, Some(TaskState::EffectUnknown));
                    }
                    crate::run::core::StoppedAs::Cancelled { kept, task_state, .. } => {
                        let to = if kept { AttemptState::ReceiptRecorded } else { AttemptState::Cancelled };
                        ledger::settle(s, id, to, Some(task_state));
                    }
                });
            }
            Write::ValidationsStopped { attempt, .. } => self.ledger.write(Durability::Normal, true, |s| {
                s.tasks.insert(attempt.task_ref.clone(), TaskState::Cancelled);
            }),
            Write::Superseded { .. } | Write::RetryStaysUnknown { .. } => {
                self.ledger.write(Durability::Full, true, |_| ())
            }
            Write::GoalConstraints(_) | Write::ClaimTakenOver { .. } => {
                self.ledger.write(Durability::Normal, true, |_| ())
            }
        }
        Ok(())
    }

    /// Attempt `id` leaves doubt `how`: checked against what the world showed.
    fn resolve(&mut self, id: crate::ids::AttemptId, how: How) {
        let Some(before) = self.ledger.current().attempts.get(&id).cloned() else { return };
        let safe = self.safe(&before.task_ref);
        self.checks.on_resolve(&before, how, safe);
    }

    /// A transaction with more to say than that it committed.
    fn record(&mut self, r: Record) -> Answered {
        match r {
            Record::RunStarted { reply, .. } => {
                let seq = self.ledger.write(Durability::Normal, true, |s| Seq(s.commits + 1));
                reply.send(Ok(seq))
            }
            Record::Gate(call, reply) => reply.send(Ok(self.gate(&call))),
            Record::Receipt(r, reply) => {
                if r.via.is_some() {
                    self.resolve(r.attempt_id, How::ByHandle);
                }
                let status = match &r.receipt {
                    providers::Receipt::Http(h) => h.status,
                    _ => 500,
                };
                let validates = self.plan.task(&r.task_ref).is_some_and(|t| !t.validations.is_empty());
                let (attempt, task, verdict) = match (status < 300, validates) {
                    (true, true) => (AttemptState::ReceiptRecorded, None, Verdict::Validate),
                    (true, false) => (AttemptState::Succeeded, Some(TaskState::Succeeded), Verdict::Succeeded),
                    (false, _) => (AttemptState::Failed, Some(TaskState::Failed), Verdict::Failed),
                };
                let durability = self.stakes(&r.task_ref).map_or(Durability::Full, durability::of_attempt);
                self.ledger.write(durability, true, |s| ledger::settle(s, r.attempt_id, attempt, task));
                reply.send(Ok((verdict, None)))
            }
            Record::Unknown { attempt_id, reply, .. } => {
                self.resolve(attempt_id, How::Unknown);
                let before = self.ledger.current().attempts.get(&attempt_id).cloned();
                self.ledger.write(Durability::Full, true, |s| {
                    ledger::settle(s, attempt_id, AttemptState::EffectUnknown, Some(TaskState::EffectUnknown));
                });
                let answer = before.map(Box::new).ok_or_else(|| Error::internal("no such attempt in the model"));
                reply.send(answer)
            }
            Record::Validations(v, reply) => {
                let passed = v.judged.passed();
                let (a, t) = match passed {
                    true => (AttemptState::Succeeded, TaskState::Succeeded),
                    false => (AttemptState::Failed, TaskState::Failed),
                };
                self.ledger.write(Durability::Normal, true, |s| ledger::settle(s, v.attempt_id, a, Some(t)));
                reply.send(Ok(Vec::new()))
            }
            Record::Acceptance(_, reply) => {
                self.ledger.write(Durability::Normal, true, |_| ());
                reply.send(Ok(Vec::new()))
            }
            Record::CompletedFromReadBack(_, reply) => {
                reply.send(Err(Error::internal("no person's retry in the model: nothing is read back first")))
            }
        }
    }

    /// The call-site gate: `decide::gate` over the modelled ledger's facts
    /// (no approval is ever open: no person approves in the model), the
    /// intent committed at its stakes' durability.
    fn gate(&mut self, call: &GateCall) -> Applied {
        let Some(task) = self.plan.task(&call.task_ref) else {
            return Applied::Stopped(Decision::PlanMoved { active: Revision(1) });
        };
        let decision = {
            let s = self.ledger.current();
            let counted = |a: &&crate::store::attempts::AttemptRecord| a.state != AttemptState::Cancelled;
            let counted_ref = |a: &&&crate::store::attempts::AttemptRecord| a.state != AttemptState::Cancelled;
            let of_task: Vec<_> = s.attempts_of(&call.task_ref).collect();
            let unsettled = of_task
                .iter()
                .find(|a| a.state.in_doubt() || a.state == AttemptState::EffectUnknown)
                .map(|a| (a.id, a.state));
            // Dispatched, or may have been (no `dispatched` record says it was not).
            let prior_dispatch = of_task.iter().any(|a| {
                a.dispatched_at_ms.is_some() || !matches!(a.state, AttemptState::Cancelled | AttemptState::Failed)
            });
            let cost = s.attempts.values().filter(counted).map(|a| a.cost.micros()).sum();
            let usage = crate::decide::budget::Usage {
                attempts_of_task: of_task.iter().filter(counted_ref).count() as u64,
                provider_calls: s.attempts.values().filter(counted).count() as u64,
                cost: crate::cost::Cost::from_micros(cost),
                elapsed_seconds: 0,
            };
            let (always, paid_or_external) = ApprovalFacts::of_task(task);
            gate::decide(&gate::Facts {
                revision: Revision(1),
                active_revision: Revision(1),
                plan_digest: "",
                active_plan_digest: "",
                unsettled,
                same_request: None,
                conflict: None,
                request_digest: &call.request_digest,
                budgets: &call.budgets,
                usage,
                call_cost: task.cost(),
                may_spend: task.may_spend,
                approval: ApprovalFacts {
                    always,
                    paid_or_external,
                    asked_repeat: call.asked_repeat,
                    prior_dispatch,
                    open: &[],
                },
                now_ms: 0,
            })
        };
        self.apply(call, decision)
    }

    /// The gate's decision, committed: the intent, or what stopped it.
    fn apply(&mut self, call: &GateCall, decision: Decision) -> Applied {
        let task_ref = call.task_ref.as_str();
        let stopped_as = match &decision {
            Decision::Go { .. } => None,
            Decision::AwaitApproval(_) => Some(TaskState::AwaitingApproval),
            Decision::Unsettled { .. } => Some(TaskState::EffectUnknown),
            _ => Some(TaskState::Pending),
        };
        if let Some(state) = stopped_as {
            self.tell(format!("gate: {task_ref} not sent ({decision:?})"));
            let keep = state == TaskState::Pending;
            self.ledger.write(Durability::Normal, true, |s| {
                if !keep {
                    s.tasks.insert(task_ref.to_string(), state);
                }
            });
            return Applied::Stopped(decision);
        }
        let durability = self.stakes(task_ref).map_or(Durability::Full, durability::of_attempt);
        let (plan, kind) = (self.plan, call.kind);
        let what = (task_ref, &call.operation_id, &call.request_digest);
        let record = self.ledger.write(durability, true, |s| ledger::intent(s, plan, what, kind));
        let held = self.ledger.current().held.contains(task_ref);
        let owed = !self.traits(task_ref).replayable();
        self.checks.on_intent(&record, (held, owed), self.ledger.current(), &self.plan.file.budgets);
        self.tell(format!(
            "intent: attempt {} of {task_ref} ({} try {}, {durability:?})",
            record.id, record.operation_id, record.try_no
        ));
        Applied::Go { intent: record.intent(), try_no: record.try_no }
    }

    /// Facts for a decision, from the ledger as the run's own reads see it.
    fn read(&mut self, r: Read) -> Answered {
        let s: &State = self.ledger.current();
        let of_revision = |keep: &dyn Fn(AttemptState) -> bool| -> Vec<_> {
            s.attempts.values().filter(|a| keep(a.state)).cloned().collect()
        };
        match r {
            Read::Raises(reply) => reply.send(Ok(Vec::new())),
            Read::InDoubt(reply) => {
                let attempts = of_revision(&|st| st.in_doubt());
                reply.send(Ok(InDoubt { skip: Default::default(), attempts }))
            }
            Read::Unjudged { reply, .. } => reply.send(Ok(of_revision(&|st| st == AttemptState::ReceiptRecorded))),
            Read::Attempt(id, reply) => {
                let a = s.attempts.get(&id).cloned();
                reply.send(a.ok_or_else(|| Error::internal(format!("attempt {id} is not in the model's ledger"))))
            }
            Read::AttemptsOf(task_ref, reply) => reply.send(Ok(s.attempts_of(&task_ref).cloned().collect())),
            Read::WaitedTrySettled(_, reply) => reply.send(Ok(false)),
            Read::SettledNotRun(reply) => reply.send(Ok(Vec::new())),
            Read::Tasks(reply) => reply.send(Ok(s.tasks.iter().map(|(r, t)| (r.clone(), *t)).collect())),
            Read::HeldElsewhere(reply) => reply.send(Ok(Default::default())),
            Read::TaskNow(task_ref, reply) => reply.send(Ok(s.tasks.get(&task_ref).copied())),
            Read::FinishedSince(_, reply) => reply.send(Ok(false)),
        }
    }

    /// A request of the world.
    fn world(&mut self, w: WorldAction) -> Answered {
        match w {
            WorldAction::ListTools(named, reply) => reply.send(self.world.list_tools(named)),
            WorldAction::Send(call, reply) => {
                self.send(&call);
                reply.send(())
            }
            WorldAction::Look { attempt, ask_handle, reply, .. } => {
                let traits = self.traits(&attempt.task_ref);
                let looked = self.world.look(&(attempt.operation_id.clone(), attempt.try_no), &traits, ask_handle);
                self.checks.on_look(attempt.id, looked.observed);
                self.tell(format!("look at attempt {} of {}: {:?}", attempt.id, attempt.task_ref, looked.observed));
                reply.send(looked)
            }
            WorldAction::LookSuperseded { reply, .. } => {
                reply.send(Err(Error::internal("the model has one revision: nothing is superseded")))
            }
            WorldAction::Cancel(_, reply) | WorldAction::Say(_, reply) => reply.send(()),
            WorldAction::AbortAccept(reply) => {
                self.world.abort_accept();
                reply.send(())
            }
            WorldAction::Abort(id, reply) => {
                self.world.abort(id);
                reply.send(())
            }
            WorldAction::Validate(v, reply) => {
                let passes = self.traits(&v.task_ref).passes;
                self.world.validate(v, passes);
                reply.send(())
            }
            WorldAction::Accept { constraint_checks, checks, reply } => {
                self.world.accept(constraint_checks, checks);
                reply.send(())
            }
            WorldAction::Wait(wait, reply) => reply.send(self.world.wait(wait)),
            WorldAction::TryMessage(reply) => reply.send(self.world.try_message()),
            WorldAction::SignalPending(reply) => {
                let signal = self.world.signal_pending();
                if signal.is_some() {
                    self.tell("a person stops the run".into());
                }
                reply.send(signal)
            }
            WorldAction::SignalGroups { reply, .. } => reply.send(0),
            WorldAction::Crashpoint(_, reply) => reply.send(()),
            WorldAction::Ended { reply, .. } => reply.send(Ok(())),
        }
    }

    /// A call handed to its provider: checked against the committed
    /// ledger, then done in the world.
    fn send(&mut self, call: &crate::run::core::Sending) {
        self.sends += 1;
        let traits = self.traits(&call.task_ref);
        let provider = self.plan.task(&call.task_ref).map(|t| t.provider.clone()).unwrap_or_default();
        let delivery = Delivery {
            task: &call.task_ref,
            attempt: call.attempt_id,
            operation: &call.operation_id,
            try_no: call.try_no,
            replayable: traits.replayable(),
            safe: self.safe(&call.task_ref),
            mcp: traits.mcp,
            inventory_read: self.world.listed.contains(&provider),
            answers: call.answers.is_some(),
        };
        self.checks.on_send(&delivery, self.ledger.committed());
        self.tell(format!(
            "send: attempt {} of {} ({} try {})",
            call.attempt_id, call.task_ref, call.operation_id, call.try_no
        ));
        self.world.send(call, &traits);
    }
}
