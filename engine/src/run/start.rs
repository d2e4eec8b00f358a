//! The call site: gather the gate's facts inside the transaction that
//! would commit the intent, ask `decide::gate`, apply its answer in that
//! same transaction — and only once the intent is committed, hand the call
//! to the provider.

use providers::sandbox::Record;
use serde_json::{json, Value};

use super::progress::Update;
use super::{stop, InFlight, Msg, Repair, Runner};
use crate::checkpoint::Checkpoint;
use crate::clock::now_ms;
use crate::decide::budget::Usage;
use crate::decide::gate::{self, ApprovalFacts, Decision, Missing, OpenApproval};
use crate::error::{Code, Error, Result};
use crate::failpoint;
use crate::ids::{OperationId, RequestDigest};
use crate::plan::{ProviderSpec, Task};
use crate::state::{AttemptKind, TaskState};
use crate::store::acts::{ActRef, PendingRequest};
use crate::store::attempts::{Intent, NewIntent};
use crate::store::events::{Event, EventKind};
use crate::store::goals::TaskKey;
use crate::store::Durability;
use crate::store::LedgerTx;

/// One call as the runner means to send it.
struct Call<'a> {
    task: &'a Task,
    operation_id: OperationId,
    request_digest: RequestDigest,
    repair: Option<&'a Repair>,
    /// A person asked for it (retry or repair): a repeat.
    asked_repeat: bool,
    kind: AttemptKind,
    request: Value,
    /// What the inputs looked like when the engine decided to send: a
    /// later repair compares against it to tell new evidence from repetition.
    inputs_at_intent: Option<Checkpoint>,
    /// The sandbox its provider's process runs under, recorded with the intent.
    sandbox: Record,
    /// The goal's protected paths the attempt will be judged against.
    protected: Option<Checkpoint>,
}

/// What the gate's answer left to do outside its transaction.
enum Applied {
    Go { intent: Intent, try_no: i64 },
    Stopped(Decision),
}

impl Runner<'_> {
    /// Decide and, if the gate allows, commit the intent and dispatch (on
    /// a shared store, under the task's claim: `shared::start_shared`).
    pub(super) async fn start(&mut self, task_ref: &str) -> Result<()> {
        if self.shared {
            return self.start_shared(task_ref).await;
        }
        self.start_claimed(task_ref).await
    }

    pub(super) async fn start_claimed(&mut self, task_ref: &str) -> Result<()> {
        let task = self.task(task_ref)?.clone();
        let repair = self.asked.repairs.get(task_ref).cloned();
        let digests = self
            .plan
            .digests
            .tasks
            .get(task_ref)
            .ok_or_else(|| Error::internal(format!("task {task_ref} has no digests")))?;
        let (operation_id, request_digest) = match &repair {
            Some(rep) => (rep.operation_id.clone(), rep.request_digest.clone()),
            None => (digests.operation_id.clone(), digests.request.clone()),
        };
        let retry = self.asked.retry.contains(&operation_id);
        // Upstream outputs first: they are among the inputs observed next.
        self.materialize_upstream(&task)?;
        let inputs_at_intent = self.observe_checkpoint(&task).await.ok();
        let protected = self.protected_baseline(task_ref).await?;
        let request = match &repair {
            Some(rep) => json!({ "provider": task.provider, "action": task.action, "instruction": rep.instruction }),
            None => json!({ "provider": task.provider, "action": task.action }),
        };
        let kind = match (&repair, retry) {
            (Some(_), _) => AttemptKind::Repair,
            (None, true) => AttemptKind::Retry,
            (None, false) => AttemptKind::Run,
        };
        let call = Call {
            task: &task,
            operation_id,
            request_digest,
            repair: repair.as_ref(),
            asked_repeat: repair.is_some() || retry,
            kind,
            request,
            inputs_at_intent,
            sandbox: self.sandboxes.task(&task).record(),
            protected,
        };
        if retry {
            // A person's retry reads the target back first where the task
            // declares how (`run::read_first`).
            let asked = super::read_first::Asked {
                task: &task,
                operation_id: &call.operation_id,
                request_digest: &call.request_digest,
                request: &call.request,
                inputs_at_intent: call.inputs_at_intent.as_ref(),
                protected: call.protected.as_ref(),
                sandbox: &call.sandbox,
            };
            if self.read_back_before_retry(asked).await? {
                return Ok(());
            }
        }
        let applied = match self.gate(&call) {
            Ok(a) => a,
            Err(e) if matches!(e.code, Code::PlanChanged | Code::OperationConflict | Code::StoreTampered) => {
                // Nothing was dispatched; say why in the ledger before stopping.
                let data = json!({"operation_id": call.operation_id, "code": e.code, "message": e.message});
                self.write_event(Durability::Normal, EventKind::CallRefused, Some(task_ref), None, data)?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        match applied {
            Applied::Go { intent, try_no } => self.dispatch(&call, intent, try_no),
            Applied::Stopped(decision) => self.stopped(&call, decision),
        }
    }

    /// One transaction: the facts, the gate's decision, and its records.
    fn gate(&mut self, call: &Call) -> Result<Applied> {
        let (goal_id, revision) = (self.goal_id.clone(), self.revision);
        let plan_digest = self.plan.digests.plan.clone();
        let (budgets, began_ms) = (self.budgets.clone(), self.began_ms);
        let task_ref = call.task.task_ref.as_str();
        self.ledger.write(Durability::Full, |tx| {
            let goal = tx.goal(&goal_id)?.ok_or_else(|| Error::internal(format!("goal {goal_id} vanished")))?;
            // Only the digest: the full revision row carries the whole plan
            // JSON, and reading it at every intent made a run quadratic.
            let active_plan_digest = tx.revision_plan_digest(&goal_id, goal.active_revision)?;
            let used = tx.budget_use(&goal_id)?;
            let open: Vec<OpenApproval> = tx
                .open_approvals(&call.operation_id)?
                .into_iter()
                .map(|a| OpenApproval {
                    id: a.id,
                    request_digest: a.request_digest,
                    plan_digest: a.plan_digest,
                    revision: a.revision,
                    cost: a.cost,
                })
                .collect();
            // A person's approval only if the act chain vouches for it:
            // a row written by anything else stops the run here, and
            // nothing is dispatched (STORE_TAMPERED names the row).
            for a in &open {
                tx.check_on_chain(ActRef::Approval(a.id))?;
            }
            let (always, paid_or_external) = ApprovalFacts::of_task(call.task);
            let facts = gate::Facts {
                revision,
                active_revision: goal.active_revision,
                plan_digest: &plan_digest,
                active_plan_digest: &active_plan_digest,
                unsettled: tx.first_unsettled_attempt(&goal_id, task_ref)?,
                conflict: tx.conflicting_request(&call.operation_id, &call.request_digest)?,
                request_digest: &call.request_digest,
                budgets: &budgets,
                usage: Usage {
                    attempts_of_task: tx.attempt_count(&goal_id, revision, task_ref)?,
                    provider_calls: used.calls,
                    cost: used.cost,
                    // The deadline bounds this run of work, not the goal's life.
                    elapsed_seconds: ((now_ms() - began_ms).max(0) / 1000) as u64,
                },
                call_cost: call.task.cost(),
                may_spend: call.task.may_spend,
                approval: ApprovalFacts {
                    always,
                    paid_or_external,
                    asked_repeat: call.asked_repeat,
                    prior_dispatch: tx.prior_dispatch(&goal_id, task_ref)?,
                    open: &open,
                },
            };
            let key = TaskKey { goal_id: &goal_id, revision, task_ref };
            apply(tx, key, call, gate::decide(&facts))
        })
    }

    /// A call the gate stopped: the runner's side of it.
    fn stopped(&mut self, call: &Call, decision: Decision) -> Result<()> {
        let task_ref = call.task.task_ref.as_str();
        match decision {
            Decision::Budget(exhausted) => {
                if let Some(rep) = call.repair {
                    // The repair never started: the task is still the failure it was.
                    let detail = json!({"attempt_id": rep.failed_attempt, "class": rep.classification.as_ref().map(|c| c.class),
                        "why": "repair refused: budget exhausted"});
                    self.set_task(task_ref, TaskState::Failed, detail)?;
                }
                self.stops.budget = Some(exhausted);
            }
            Decision::Unsettled { .. } => {
                self.states.insert(task_ref.to_string(), TaskState::EffectUnknown);
            }
            Decision::AwaitApproval(missing) => {
                self.states.insert(task_ref.to_string(), TaskState::AwaitingApproval);
                self.stops.awaiting.push(super::Awaiting {
                    operation_id: call.operation_id.clone(),
                    task_ref: task_ref.to_string(),
                    request_digest: call.request_digest.clone(),
                    stale: matches!(missing, Missing::Stale { .. }),
                });
            }
            Decision::PlanMoved { .. } | Decision::Conflict { .. } | Decision::Go { .. } => {}
        }
        Ok(())
    }

    /// The intent is recorded: the call is held until the intent's commit
    /// (`group::flush`), then handed over, and the provider's progress and
    /// answer come back as messages (its process group kept where a
    /// person's stop reaches it).
    fn dispatch(&mut self, call: &Call, intent: Intent, try_no: i64) -> Result<()> {
        let task_ref = call.task.task_ref.clone();
        self.states.insert(task_ref.clone(), TaskState::Running);
        self.dispatched.insert(task_ref.clone());
        let provider_call = self.call_for(call.task, &call.operation_id, try_no as u32, call.repair);
        let provider = self
            .providers
            .get(&call.task.provider)
            .cloned()
            .ok_or_else(|| Error::internal(format!("no provider `{}`", call.task.provider)))?;
        let processless = !matches!(self.plan.provider_of(call.task), ProviderSpec::Command { .. });
        let attempt_id = intent.attempt_id();
        let mut flight = InFlight::new(intent, &task_ref);
        flight.call = Some((call.task.provider.clone(), provider_call.clone()));
        flight.protected = call.protected.clone();
        flight.processless = processless;
        self.in_flight.insert(attempt_id, flight);
        self.held.calls.push(Held { attempt_id, provider, call: provider_call, try_no });
        Ok(())
    }

    /// Hand a held call over, its intent committed.
    pub(super) fn send(&mut self, held: Held) {
        failpoint::hit("after_intent");
        let Held { attempt_id, provider, call, try_no } = held;
        let (tx, groups) = (self.tx.clone(), self.stop.groups.clone());
        let work = tokio::spawn(async move {
            let forward = |progress| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(Msg::Progress { attempt_id, progress }).await;
                }
            };
            let (outcome, level) = stop::watched(provider.as_ref(), &call, &groups, forward).await;
            let _ = tx.send(Msg::Finished { attempt_id, outcome: Box::new(outcome), level }).await;
        });
        let Some(flight) = self.in_flight.get_mut(&attempt_id) else { return };
        flight.work = Some(work.abort_handle());
        let task_ref = flight.task_ref.clone();
        self.started.insert(task_ref.clone(), std::time::Instant::now());
        let title = self.plan.task(&task_ref).map_or("", |t| t.title.as_str());
        self.progress.update(&Update::TaskStarted { task_ref: &task_ref, title, try_no });
    }
}

/// A call whose intent is recorded, held until its commit.
pub(super) struct Held {
    attempt_id: crate::ids::AttemptId,
    provider: std::sync::Arc<dyn providers::Provider>,
    call: providers::Call,
    try_no: i64,
}

/// The gate's decision, recorded in the intent's transaction.
fn apply(tx: &mut dyn LedgerTx, key: TaskKey, call: &Call, decision: Decision) -> Result<Applied> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    let op = &call.operation_id;
    let event = |kind, data| Event::goal(kind, goal_id, revision, data).task(task_ref);
    match decision {
        Decision::PlanMoved { active } => Err(Error::new(
            Code::PlanChanged,
            format!("goal {goal_id} moved to revision {active} while this run was on revision {revision}; nothing more is dispatched"),
        )),
        Decision::Conflict { recorded } => Err(Error::new(
            Code::OperationConflict,
            format!("operation {op} was recorded with request digest {recorded}, not {}; refusing to send a different request under the same operation id", call.request_digest),
        )
        .at(task_ref.to_string())),
        Decision::Unsettled { attempt, state } => {
            // Never a new call of a task while an earlier attempt of it (of
            // this operation or another) is unknown or in doubt.
            let why = format!("attempt {} of this task is {state}: settle it first", tx.attempt_number(attempt)?);
            let detail = json!({"operation_id": op, "waits_on_attempt": attempt, "why": why});
            tx.set_task_state(key, TaskState::EffectUnknown, &detail)?;
            tx.append_event(&event(EventKind::CallRefused, json!({"operation_id": op, "why": why})))?;
            Ok(Applied::Stopped(Decision::Unsettled { attempt, state }))
        }
        Decision::Budget(exhausted) => {
            tx.append_event(&event(EventKind::BudgetExhausted, json!(exhausted)))?;
            Ok(Applied::Stopped(Decision::Budget(exhausted)))
        }
        Decision::AwaitApproval(missing) => {
            let why = missing.why();
            // `asked_by`: which command's call waits, so `engine status` can
            // name the command that spends the approval.
            let detail = json!({"operation_id": op, "request_digest": call.request_digest, "why": why, "asked_by": call.kind});
            tx.set_task_state(key, TaskState::AwaitingApproval, &detail)?;
            tx.append_event(&event(EventKind::ApprovalRequired, detail))?;
            tx.insert_pending_request(&PendingRequest {
                operation_id: op.clone(),
                goal_id: goal_id.clone(),
                revision,
                task_ref: task_ref.to_string(),
                request_digest: call.request_digest.clone(),
            })?;
            Ok(Applied::Stopped(Decision::AwaitApproval(missing)))
        }
        Decision::Go { consume, void } => commit_intent(tx, key, call, consume, &void),
    }
}

/// The intent, with the approval it spends (or the ones it voids), the
/// task running, and the event — one commit.
fn commit_intent(
    tx: &mut dyn LedgerTx,
    key: TaskKey,
    call: &Call,
    consume: Option<crate::ids::ApprovalId>,
    void: &[crate::ids::ApprovalId],
) -> Result<Applied> {
    let (goal_id, revision, task_ref) = (key.goal_id, key.revision, key.task_ref);
    let try_no = tx.last_try(&call.operation_id)? + 1;
    let intent = tx.insert_intent(&NewIntent {
        goal_id,
        revision,
        task_ref,
        operation_id: &call.operation_id,
        try_no,
        kind: call.kind,
        request_digest: &call.request_digest,
        request_json: &call.request,
        effect: call.task.effect,
        cost: call.task.cost(),
        inputs_at_intent: call.inputs_at_intent.as_ref().map(|c| c.digest.as_str()),
        instruction: call.repair.and_then(|r| r.instruction.as_deref()),
        sandbox: &call.sandbox,
        protected_at_intent: call.protected.as_ref().map(|c| c.digest.as_str()),
    })?;
    let id = intent.attempt_id();
    for cp in call.inputs_at_intent.iter().chain(&call.protected) {
        tx.put_checkpoint(cp)?;
    }
    if let Some(approval) = consume {
        tx.consume_approval(approval, id)?;
    }
    if !void.is_empty() {
        tx.void_approvals(void, id)?;
        let data = json!({
            "approval_ids": void, "why": "this call needed no approval; approvals are never kept for a later repeat",
        });
        let e = Event::goal(EventKind::ApprovalsVoided, goal_id, revision, data).task(task_ref).attempt(id);
        tx.append_event(&e)?;
    }
    tx.set_task_state(key, TaskState::Running, &json!({"attempt_id": id}))?;
    let data = json!({
        "operation_id": call.operation_id, "try": try_no, "request_digest": call.request_digest,
        "approval_consumed": consume,
    });
    tx.append_event(&Event::goal(EventKind::IntentRecorded, goal_id, revision, data).task(task_ref).attempt(id))?;
    Ok(Applied::Go { intent, try_no })
}
