//! Early cutoff, the core's side (`decide::reuse::cutoff`): a completion
//! the reuse pass put off because an upstream runs again is decided when
//! that upstream is complete again, before the task would start — kept if
//! the outputs it stands on are byte-identical (`UPSTREAM_OUTPUT_UNCHANGED`,
//! a `completion_kept` event), else stale and run (`completion_stale`). An
//! upstream that ran again and cannot cut off (no outputs, an external
//! effect) refuses it without a look.

use serde_json::{json, Value};

use super::state::Run;
use crate::decide::reuse::{cutoff, Refusal};
use crate::error::Result;
use crate::state::TaskState;
use crate::store::events::EventKind;
use crate::store::Durability;

impl Run<'_> {
    /// Was `task_ref` put off and does its completion stand now? `true`:
    /// it is complete again (kept), nothing to start.
    pub async fn cut_off(&mut self, task_ref: &str) -> Result<bool> {
        self.decide_cutoff(task_ref, false).await
    }

    /// `cut_off`, or with `stale_only` (an upstream is not complete again
    /// yet, so only a stale answer is final): a kept answer leaves the task
    /// put off, undecided, until that upstream completes.
    pub async fn decide_cutoff(&mut self, task_ref: &str, stale_only: bool) -> Result<bool> {
        let Some(was) = self.deferred.remove(task_ref) else { return Ok(false) };
        let task = self.task(task_ref)?;
        let ran: Vec<String> = task.depends_on.iter().filter(|d| self.dispatched.contains(*d)).cloned().collect();
        let kept: Vec<String> = task.depends_on.iter().filter(|d| self.cut.contains(*d)).cloned().collect();
        let no_cutoff = ran.iter().find_map(|d| Some((d, cutoff::why_no_cutoff(self.plan.task(d)?)?)));
        let answer = match no_cutoff {
            Some((dep, why)) => {
                let refusal = Refusal::UpstreamNotReused { dependency: dep.clone(), why: Some(why.into()) };
                Err(json!({"stale": refusal.code(), "detail": refusal.detail()}))
            }
            None => {
                let context = self.tool_context(task);
                self.io.cutoff(task_ref, context).await?
            }
        };
        match answer {
            Ok(_) if stale_only => {
                self.deferred.insert(task_ref.to_string(), was);
                Ok(false)
            }
            Ok(mut data) => {
                data["detail"] = Value::String(cutoff::kept_words(&ran, &kept));
                data["ran_again"] = json!(ran);
                data["kept_upstream"] = json!(kept);
                self.rechecked.insert(task_ref.to_string(), format!("kept: {}", super::reason_words(&data, "kept")));
                self.write_event(Durability::Normal, EventKind::CompletionKept, Some(task_ref), None, data).await?;
                self.states.insert(task_ref.to_string(), was);
                self.cut.insert(task_ref.to_string());
                Ok(true)
            }
            Err(stale) => {
                self.rechecked
                    .insert(task_ref.to_string(), format!("ran again: {}", super::reason_words(&stale, "stale")));
                self.write_event(Durability::Normal, EventKind::CompletionStale, Some(task_ref), None, stale.clone())
                    .await?;
                self.set_task(task_ref, TaskState::Pending, stale).await?;
                Ok(false)
            }
        }
    }
}
