//! The run's trace (`crate::trace::RunTrace`), fed from what the driver
//! performs: a gate written opens the task's span and, when it lets the
//! call go, the attempt's; a call handed over opens the provider call's
//! span (its `traceparent` goes with the call); an answer ends it; an
//! attempt's write that brings it to rest ends the attempt's span with its
//! state and class, read back from the ledger. Only when the run is
//! traced: an untraced run reads nothing more.

use providers::Outcome;

use super::Driver;
use crate::decide::gate::Decision;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::plan::ProviderSpec;
use crate::run::core::{Applied, GateCall, Msg, Wake, Write};
use crate::run::report::RunReport;
use crate::state::AttemptState;
use crate::trace::Attempt;

/// A gate about to be written, to the trace.
pub(super) struct Gated {
    task_ref: String,
    operation_id: String,
    kind: &'static str,
}

impl Driver<'_, '_> {
    /// Before a write that may bring an attempt to rest: its span, if open.
    pub(super) fn trace_write(&mut self, w: &Write) -> Option<AttemptId> {
        let attempt = match w {
            Write::Failed { attempt_id, .. } => *attempt_id,
            Write::CallStopped(c) => c.attempt.id,
            Write::ObservedReceipt { attempt, .. }
            | Write::Abandon { attempt, .. }
            | Write::Superseded { attempt, .. }
            | Write::ValidationsStopped { attempt, .. } => attempt.id,
            _ => return None,
        };
        self.trace_attempt(attempt)
    }

    /// Before a write of `attempt`: its span, if the run is traced and it is open.
    pub(super) fn trace_attempt(&mut self, attempt: AttemptId) -> Option<AttemptId> {
        self.trace.as_mut()?.attempt_open(attempt).then_some(attempt)
    }

    /// After an attempt's write that committed: its span ends if it is at rest.
    pub(super) fn trace_written<T>(&mut self, traced: Option<AttemptId>, written: &Result<T>) {
        if let (Some(id), Ok(_)) = (traced, written) {
            self.trace_attempt_end(id);
        }
    }

    /// Before the gate: the task about to be gated gets its span.
    pub(super) fn trace_gate(&mut self, call: &GateCall) -> Option<Gated> {
        let trace = self.trace.as_mut()?;
        let task = self.scope.task(&call.task_ref).ok()?;
        trace.task(&call.task_ref, &task.provider, provider_kind(self.scope.plan.provider_of(task)));
        let operation_id = call.operation_id.to_string();
        Some(Gated { task_ref: call.task_ref.clone(), operation_id, kind: call.kind.as_str() })
    }

    /// After the gate: an attempt begun, or a gate that stopped.
    pub(super) fn trace_gated(&mut self, gated: Option<Gated>, applied: &Result<Applied>) {
        let (Some(trace), Some(Gated { task_ref, operation_id, kind }), Ok(applied)) =
            (self.trace.as_mut(), gated, applied)
        else {
            return;
        };
        match applied {
            Applied::Go { intent, try_no } => {
                let a = Attempt { task_ref: &task_ref, operation_id: &operation_id, try_no: *try_no, kind };
                trace.attempt(intent.attempt_id(), a);
            }
            Applied::Stopped(decision) => trace.gate_stopped(&task_ref, gate_word(decision)),
        }
    }

    /// The attempt's state now; its span ends once it is at rest.
    fn trace_attempt_end(&mut self, id: AttemptId) {
        let Ok(a) = self.ledger.read().attempt(id) else { return };
        if matches!(a.state, AttemptState::IntentRecorded | AttemptState::Dispatched | AttemptState::ReceiptRecorded) {
            return;
        }
        let class = a.classification.as_ref().map(|c| (c.class.as_str(), c.rule.as_str()));
        if let Some(trace) = self.trace.as_mut() {
            trace.attempt_ended(id, a.state.as_str(), class);
        }
    }

    /// A call handed over: its span, and the `traceparent` it is sent.
    pub(super) fn trace_call(&mut self, id: AttemptId, operation_id: &str, try_no: i64) -> Option<String> {
        self.trace.as_mut()?.call(id, operation_id, try_no)
    }

    /// What the world said meanwhile: a call's answer ends its span.
    pub(super) fn trace_wake(&mut self, wake: &Wake) {
        if let Wake::Message(msg) = wake {
            self.trace_msg(msg);
        }
    }

    /// A message from in-flight work: a call's answer ends its span.
    pub(super) fn trace_msg(&mut self, msg: &Msg) {
        let (Some(trace), Msg::Finished { attempt_id, outcome, .. }) = (self.trace.as_mut(), msg) else {
            return;
        };
        let (word, why) = match outcome.as_ref() {
            Outcome::Received(_) => ("received", None),
            Outcome::NotDispatched(nd) => ("not_dispatched", Some(format!("{:?}", nd.kind))),
            Outcome::Lost { reason, .. } => ("lost", Some(format!("{reason:?}"))),
        };
        trace.call_ended(*attempt_id, word, why.as_deref().map(snake).as_deref());
    }

    /// The run's end: open attempts and tasks end with their state in the
    /// ledger, the run's span with the goal's state and exit code.
    pub(super) fn trace_finish(&mut self, report: &Result<RunReport>) {
        let Some(open) = self.trace.as_ref().map(|t| t.open_attempts()) else { return };
        for id in open {
            self.trace_attempt_end(id);
        }
        let Some(mut trace) = self.trace.take() else { return };
        let (goal_id, revision) = (&self.scope.goal_id, self.scope.revision);
        for task_ref in trace.open_tasks() {
            if let Ok(Some(t)) = self.ledger.read().task(goal_id, revision, &task_ref) {
                trace.task_ended(&task_ref, t.state.as_str());
            }
        }
        match report {
            Ok(r) => trace.finish(r.goal_state.as_str(), r.exit_code),
            Err(e) => trace.finish("error", e.code.exit_code()),
        }
    }
}

/// The provider's kind as the plan names it (an agent is a command that
/// speaks the agent protocol).
fn provider_kind(spec: &ProviderSpec) -> &'static str {
    match spec {
        ProviderSpec::Command { protocol: Some(_), .. } => "agent",
        ProviderSpec::Command { .. } => "command",
        ProviderSpec::Http { .. } => "http",
        ProviderSpec::Mcp { .. } => "mcp",
        ProviderSpec::Builtin {} => "builtin",
    }
}

fn gate_word(d: &Decision) -> &'static str {
    match d {
        Decision::PlanMoved { .. } => "plan_moved",
        Decision::Unsettled { .. } => "unsettled",
        Decision::SameRequest(_) => "same_request_unsettled",
        Decision::Conflict { .. } => "conflict",
        Decision::Budget(_) => "budget_exhausted",
        Decision::AwaitApproval(_) => "awaiting_approval",
        Decision::AnswerExpired { .. } => "answer_expired",
        Decision::Go { .. } => "go",
    }
}

/// `DeadlineAfterDispatch` → `deadline_after_dispatch`.
fn snake(word: &str) -> String {
    let mut out = String::new();
    for (i, c) in word.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}
