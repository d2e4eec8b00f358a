//! Each request of the core performed and answered through its own reply
//! (`core::Reply`): the answer's type is the request's, so nothing here
//! can answer one request with another's answer, and nothing is decided.

use super::{cutoff, finish, goal_left, ledger, reads, Driver};
use crate::run::core::{Action, Answered, Record, WorldAction};

impl Driver<'_, '_> {
    /// Perform `action` and answer it.
    pub(super) async fn perform(&mut self, action: Action) -> Answered {
        let plan = self.scope.plan;
        match &action {
            // A call's processes: judged by their own look after it, and
            // beside every attempt started while it is in flight.
            Action::World(WorldAction::Send(s, _)) => self.workspace.sent(s.attempt_id),
            a if !a.leaves_workspace(|r| plan.task(r).is_some_and(crate::checkpoint::starts_nothing)) => {
                self.workspace.disturbed()
            }
            _ => {}
        }
        match action {
            Action::Open(reply) => reply.send(self.open()),
            Action::Write(w, reply) => {
                self.workspace.forget_upstream_of(&w);
                let traced = self.trace_write(&w);
                let written = ledger::write(self.ledger, &self.scope, w);
                self.trace_written(traced, &written);
                reply.send(written)
            }
            Action::Record(r) => self.record(r),
            Action::WriteLater(d, reply) => reply.send(self.ledger.write_later(ledger::dispatched(&self.scope, d))),
            Action::BeginGroup(reply) => reply.send(self.ledger.begin_group()),
            Action::CommitGroup(reply) => reply.send(self.ledger.commit_group()),
            Action::Read(r) => reads::read(self.ledger, &self.scope, r),
            Action::Claim(task_ref, reply) => reply.send(self.ledger.claim(&self.scope.goal_id, &task_ref)),
            Action::Release(task_ref, reply) => reply.send(self.ledger.release_claim(&self.scope.goal_id, &task_ref)),
            Action::Materialize(task_ref, reply) => {
                reply.send(self.workspace.materialize(self.ledger, &self.scope, task_ref.as_deref()))
            }
            Action::Observe { task_ref, context, identity, reply } => {
                reply.send(self.observe(&task_ref, context, identity).await)
            }
            Action::Cutoff { task_ref, context, reply } => {
                let sandbox = self.workspace.sandbox().clone();
                let (cache, programs) = (&mut self.workspace.cache, &mut self.workspace.programs);
                reply.send(cutoff::decide(self.ledger, &self.scope, &task_ref, context, (cache, programs, &sandbox)))
            }
            Action::Baseline(task_ref, in_flight, reply) => {
                reply.send(self.workspace.baseline(self.world, self.ledger, &self.scope, (&task_ref, in_flight)).await)
            }
            Action::JudgeProtected { attempt_id, task_ref, before, writes, others, reply } => {
                reply.send(self.judge_protected(attempt_id, &task_ref, (before, writes, others)).await)
            }
            Action::CollectOutputs(task_ref, reply) => reply.send(self.collect_outputs(&task_ref).await),
            Action::Refresh { states, tools, across_tool_change, alone, reply } => {
                reply.send(self.refresh((states.as_slice(), &tools, across_tool_change, &alone)))
            }
            Action::Forget(reply) => {
                self.first_look = None;
                self.completions = None;
                reply.send(())
            }
            Action::World(w) => self.perform_world(w).await,
            Action::Finish(closing, reply) => {
                let dirty = self.workspace.cache.take_dirty();
                let mut closer = finish::Closer { ledger: self.ledger, scope: &self.scope, c: *closing };
                reply.send(closer.finish(dirty))
            }
            Action::ReportJudged(closing, reply) => {
                let mut closer = finish::Closer { ledger: self.ledger, scope: &self.scope, c: *closing };
                reply.send(closer.report_judged())
            }
        }
    }

    /// A transaction whose answer says more than that it committed; an
    /// attempt's span ends when the transaction brings it to rest.
    fn record(&mut self, r: Record) -> Answered {
        let scope = &self.scope;
        match r {
            Record::RunStarted { jobs, reply } => reply.send(ledger::run_started(self.ledger, scope, jobs)),
            Record::Gate(call, reply) => {
                self.workspace.forget_upstream(Some(&call.task_ref));
                let gated = self.trace_gate(&call);
                let applied = ledger::gate(self.ledger, &self.scope, &*self.world, &call);
                self.trace_gated(gated, &applied);
                reply.send(applied)
            }
            Record::Receipt(r, reply) => {
                let traced = self.trace_attempt(r.attempt_id);
                let written = ledger::receipt(self.ledger, &self.scope, &r);
                self.trace_written(traced, &written);
                reply.send(written)
            }
            Record::Unknown { attempt_id, looked, evidence, reason, reply } => {
                let traced = self.trace_attempt(attempt_id);
                let written = ledger::unknown(self.ledger, &self.scope, (attempt_id, looked, evidence, reason));
                self.trace_written(traced, &written);
                reply.send(written)
            }
            Record::Validations(v, reply) => {
                let traced = self.trace_attempt(v.attempt_id);
                let written = ledger::validations(self.ledger, &self.scope, &v);
                self.trace_written(traced, &written);
                reply.send(written)
            }
            Record::Acceptance(runs, reply) => reply.send(ledger::acceptance(self.ledger, scope, &runs)),
            Record::CompletedFromReadBack(from, reply) => {
                reply.send(ledger::completed_from_read_back(self.ledger, scope, &*self.world, &from))
            }
        }
    }

    /// A request of the world: providers, processes, signals, the person watching.
    async fn perform_world(&mut self, w: WorldAction) -> Answered {
        match w {
            WorldAction::ListTools(named, reply) => reply.send(self.world.list_tools(&named).await),
            WorldAction::Send(call, reply) => {
                let traceparent = self.trace_call(call.attempt_id, call.operation_id.as_str(), call.try_no);
                reply.send(self.world.send(&call, traceparent.as_deref()))
            }
            WorldAction::Look { attempt, ask_handle, deadline, reply } => {
                let left = goal_left(self.world.now_ms(), deadline.began_ms, deadline.seconds);
                reply.send(self.world.look(&attempt, ask_handle, left).await)
            }
            WorldAction::LookSuperseded { attempt, deadline, reply } => {
                let left = goal_left(self.world.now_ms(), deadline.began_ms, deadline.seconds);
                reply.send(self.look_superseded(&attempt, left).await)
            }
            WorldAction::Cancel(attempt, reply) => reply.send(self.world.cancel(&attempt)),
            WorldAction::Abort(attempt_id, reply) => reply.send(self.world.abort(attempt_id)),
            WorldAction::Validate(v, reply) => reply.send(self.world.validate(v)),
            WorldAction::Accept { constraint_checks, checks, reply } => {
                reply.send(self.world.accept(constraint_checks, checks))
            }
            WorldAction::AbortAccept(reply) => reply.send(self.world.abort_accept()),
            WorldAction::Wait(w, reply) => {
                let wake = self.world.wait(w).await;
                self.trace_wake(&wake);
                reply.send(wake)
            }
            WorldAction::TryMessage(reply) => {
                let msg = self.world.try_message();
                if let Some(msg) = &msg {
                    self.trace_msg(msg);
                }
                reply.send(msg)
            }
            WorldAction::SignalPending(reply) => reply.send(self.world.signal_pending()),
            WorldAction::SignalGroups { level, timer, reply } => reply.send(self.world.signal_groups(level, timer)),
            WorldAction::Say(say, reply) => reply.send(self.say(say)),
            WorldAction::Ended { task_ref, state, reply } => {
                if let Some(trace) = self.trace.as_mut() {
                    trace.task_ended(&task_ref, state.as_str());
                }
                reply.send(self.ended(&task_ref, state))
            }
            WorldAction::Crashpoint(name, reply) => reply.send(self.world.crashpoint(name)),
        }
    }
}
