//! The call site: the call as the run means to send it, the gate's
//! decision inside the transaction that would commit its intent
//! (`decide::gate`, `driver::gate`), and what follows from it — the call
//! held until the intent's commit, or the stop the gate said.

use serde_json::{json, Value};

use super::action::{GateCall, Record, Sending};
use super::event::Applied;
use super::state::{Flight, Run};
use crate::decide::gate::{Decision, Missing};
use crate::error::{Code, Error, Result};
use crate::ids::{AttemptId, OperationId, RequestDigest, RequestFingerprint};
use crate::plan::{digests, ProviderSpec, Task};
use crate::run::asked::{Answering, Repair, Rerun};
use crate::run::constraints::starts_process;
use crate::run::report::Awaiting;
use crate::state::{AttemptKind, TaskState};
use crate::store::attempts::Intent;
use crate::store::events::EventKind;
use crate::store::Durability;

/// A refusal that stops new work (what is in flight is drained first).
pub(super) fn stops_new_work(e: &Error) -> bool {
    matches!(e.code, Code::PlanChanged | Code::OperationConflict | Code::StoreTampered)
}

/// A task that calls an MCP tool.
fn calls_a_tool(task: &crate::plan::Task) -> bool {
    task.action.get("tool").is_some()
}

/// The request document an intent records: the provider, the action and
/// what a repair or a person's answers add, with its fingerprint — the
/// request by its content, what an identical request of another task or
/// goal is known by (the gate's rule 3).
fn request_of(
    spec: &ProviderSpec,
    task: &Task,
    (repair, answering): (Option<&Repair>, Option<&Answering>),
) -> (Value, Option<RequestFingerprint>) {
    let mut request = match (repair, answering) {
        (Some(rep), _) => json!({ "provider": task.provider, "action": task.action, "instruction": rep.instruction }),
        (None, Some(a)) => json!({ "provider": task.provider, "action": task.action, "answers": a.answers }),
        (None, None) => json!({ "provider": task.provider, "action": task.action }),
    };
    let instruction = repair.and_then(|r| r.instruction.as_deref());
    let fingerprint = digests::request_fingerprint(spec, task, instruction, answering.map(|a| &a.answers));
    if let Some(fp) = &fingerprint {
        request["fingerprint"] = json!(fp);
    }
    (request, fingerprint)
}

/// The person's answers the call carries, if any.
fn answers_sent(task: &Task, answering: Option<Answering>) -> Option<Box<Value>> {
    let mut answers = answering.map(|a| Box::new(a.answers));
    if crate::failpoint::fault(crate::failpoint::Fault::AnswerOnItsOwn) && answers.is_none() && calls_a_tool(task) {
        // Planted fault: the engine makes up a person's answer.
        answers = Some(Box::new(json!({"responses": [], "made_up_by": "the engine"})));
    }
    answers
}

/// What a person asked of a task's next call, and the operation it is:
/// a repair (it answers a failure), else an answer to the task's server (a
/// request of its own, as a repair is), else a rerun (a new operation of
/// the task's own request), else the plan's own operation; `retry`: a
/// person asked to send that operation again.
struct AskedOf {
    repair: Option<Repair>,
    answering: Option<Answering>,
    rerun: Option<Rerun>,
    retry: bool,
    operation_id: OperationId,
    request_digest: RequestDigest,
}

impl AskedOf {
    /// The kind of attempt the call makes.
    fn kind(&self) -> AttemptKind {
        match (&self.repair, self.retry, &self.rerun) {
            (Some(_), _, _) => AttemptKind::Repair,
            (None, true, _) => AttemptKind::Retry,
            (None, false, Some(_)) => AttemptKind::Rerun,
            (None, false, None) => AttemptKind::Run,
        }
    }

    /// A person asked for it (retry, repair, rerun): a repeat.
    fn repeat(&self) -> bool {
        self.repair.is_some() || self.retry || self.rerun.is_some()
    }
}

impl Run<'_> {
    /// Decide and, if the gate allows, commit the intent and hold the call
    /// for the commit.
    pub async fn start_claimed(&mut self, task_ref: &str) -> Result<()> {
        let task = self.task(task_ref)?;
        let asked = self.asked_of(task_ref)?;
        // A completion put off for its upstream: kept if what it stands on
        // is unchanged (early cutoff), else it runs. Only on a store of its
        // own, where every upstream ran or was kept in this workspace (its
        // outputs here: `driver::restore`), so before materializing, which
        // walks every ancestor.
        if self.cut_off(task_ref).await? {
            return Ok(());
        }
        let (retry, answering) = (asked.retry, asked.answering.clone());
        let call = self.gate_call(task, asked).await?;
        // A person's retry reads the target back first where the task
        // declares how (`read_first`).
        if retry && self.read_back_before_retry(&call, task).await? {
            return Ok(());
        }
        let (request_digest, protected) = (call.request_digest.clone(), call.protected.clone());
        let sending = Sending {
            attempt_id: AttemptId(0),
            task_ref: task_ref.to_string(),
            operation_id: call.operation_id.clone(),
            try_no: 0,
            repair: call.repair.clone(),
            answers: None,
        };
        let applied = self.gate(call).await?;
        let sending = Sending { answers: answers_sent(task, answering), ..sending };
        match applied {
            Applied::Go { intent, try_no } => {
                self.dispatch(Sending { try_no, ..sending }, intent, protected);
                Ok(())
            }
            Applied::Stopped(decision) => self.stopped(&sending, request_digest, decision).await,
        }
    }

    /// What a person asked of the task's next call (`AskedOf`).
    fn asked_of(&self, task_ref: &str) -> Result<AskedOf> {
        let repair = self.asked.repairs.get(task_ref).cloned();
        let digests = self
            .plan
            .digests()
            .tasks
            .get(task_ref)
            .ok_or_else(|| Error::internal(format!("task {task_ref} has no digests")))?;
        let answering = self.asked.answers.get(task_ref).filter(|_| repair.is_none()).cloned();
        let rerun = self.asked.reruns.get(task_ref).filter(|_| repair.is_none() && answering.is_none()).cloned();
        let (operation_id, request_digest) = match (&repair, &answering, &rerun) {
            (Some(rep), _, _) => (rep.operation_id.clone(), rep.request_digest.clone()),
            (None, Some(a), _) => (a.operation_id.clone(), a.request_digest.clone()),
            (None, None, Some(r)) => (r.operation_id.clone(), r.request_digest.clone()),
            (None, None, None) => (digests.operation_id.clone(), digests.request.clone()),
        };
        let retry = self.asked.retry.contains(&operation_id);
        Ok(AskedOf { repair, answering, rerun, retry, operation_id, request_digest })
    }

    /// The call as the run means to send it, for the gate: upstream
    /// outputs in place first (they are among the inputs observed), the
    /// inputs and protected paths as they stand, the request document.
    async fn gate_call(&mut self, task: &Task, asked: AskedOf) -> Result<GateCall> {
        let task_ref = task.task_ref.as_str();
        self.io.materialize(Some(task_ref)).await?;
        let inputs_at_intent = self.observe_inputs(task).await.ok();
        let process = starts_process(self.plan.provider_of(task));
        let protected = match self.guard.protects(process) {
            // What is in flight now (`None`: checks run): the run vouches
            // that nothing else of its own runs (what ran since the
            // driver's last look, it knows).
            true => self.io.baseline(task_ref, self.beside(None)).await?,
            false => None,
        };
        let (mut request, fingerprint) =
            request_of(self.plan.provider_of(task), task, (asked.repair.as_ref(), asked.answering.as_ref()));
        if let Some(r) = &asked.rerun {
            request["rerun"] = json!(r.number);
        }
        let (kind, asked_repeat) = (asked.kind(), asked.repeat());
        Ok(GateCall {
            task_ref: task_ref.to_string(),
            operation_id: asked.operation_id,
            request_digest: asked.request_digest,
            fingerprint,
            asked_repeat,
            repair: asked.repair,
            kind,
            request,
            inputs_at_intent,
            protected,
            budgets: self.budgets.clone(),
            began_ms: self.began_ms,
            answer_expires: asked.answering.and_then(|a| a.expires),
        })
    }

    /// The gate's transaction: the intent committed, or the stop the gate
    /// said. A refusal that stops new work is said in the ledger first
    /// (nothing was dispatched).
    async fn gate(&mut self, call: GateCall) -> Result<Applied> {
        let (task_ref, operation_id) = (call.task_ref.clone(), call.operation_id.clone());
        match self.io.record(|reply| Record::Gate(Box::new(call), reply)).await {
            Err(e) if stops_new_work(&e) => {
                let data = json!({"operation_id": operation_id, "code": e.code, "message": e.message});
                self.write_event(Durability::Normal, EventKind::CallRefused, Some(&task_ref), None, data).await?;
                Err(e)
            }
            applied => applied,
        }
    }

    /// A call the gate stopped: the core's side of it.
    async fn stopped(
        &mut self,
        call: &Sending,
        request_digest: crate::ids::RequestDigest,
        decision: Decision,
    ) -> Result<()> {
        let task_ref = call.task_ref.as_str();
        match decision {
            Decision::Budget(exhausted) => {
                if let Some(rep) = &call.repair {
                    // The repair never started: the task is still the failure it was.
                    let detail = json!({"attempt_id": rep.failed_attempt, "class": rep.classification.as_ref().map(|c| c.class),
                        "why": "repair refused: budget exhausted"});
                    self.set_task(task_ref, TaskState::Failed, detail).await?;
                }
                self.stops.budget = Some(exhausted);
            }
            Decision::Unsettled { .. } => {
                self.states.insert(task_ref.to_string(), TaskState::EffectUnknown);
            }
            Decision::AnswerExpired { .. } => {
                self.states.insert(task_ref.to_string(), TaskState::AwaitingInput);
            }
            Decision::SameRequest(first) => {
                self.states.insert(task_ref.to_string(), TaskState::Blocked);
                let wait = crate::run::report::SameRequestWait::of(task_ref, &call.operation_id, first);
                self.stops.same_request.push(wait);
            }
            Decision::AwaitApproval(missing) => {
                self.states.insert(task_ref.to_string(), TaskState::AwaitingApproval);
                self.stops.awaiting.push(Awaiting {
                    operation_id: call.operation_id.clone(),
                    task_ref: task_ref.to_string(),
                    request_digest,
                    stale: matches!(missing, Missing::Stale { .. }),
                    cost: self.task(task_ref)?.cost(),
                });
            }
            Decision::PlanMoved { .. } | Decision::Conflict { .. } | Decision::Go { .. } => {}
        }
        Ok(())
    }

    /// The intent is recorded: the call is held until the intent's commit
    /// (`flush`), then handed over, and the provider's progress and answer
    /// come back as messages.
    fn dispatch(&mut self, mut call: Sending, intent: Intent, protected: Option<crate::checkpoint::Checkpoint>) {
        let task_ref = call.task_ref.clone();
        self.states.insert(task_ref.clone(), TaskState::Running);
        self.dispatched.insert(task_ref.clone());
        let processless = self
            .plan
            .task(&task_ref)
            .is_some_and(|task| !matches!(self.plan.provider_of(task), ProviderSpec::Command { .. }));
        let attempt_id = intent.attempt_id();
        let mut flight = Flight::new(intent, &task_ref);
        flight.protected = protected;
        flight.processless = processless;
        self.in_flight.insert(attempt_id, flight);
        call.attempt_id = attempt_id;
        self.held.calls.push(call);
    }
}
