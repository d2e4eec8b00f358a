//! A run's first look at the workspace, for a plan whose inputs the load
//! left to it (`plan::Inputs::ToCheck`: the plan cache vouched for the
//! file's bytes). Under the lease and before the run writes anything, every
//! input is checked to stay inside the workspace, refused as a full load
//! refuses it; one expansion of each input serves both that check and,
//! for a task complete now, the reuse pass's observation (`fresh.rs`).

use std::collections::HashMap;

use super::Runner;
use crate::checkpoint::{self, Expanded};
use crate::error::Result;
use crate::plan::{self, Effect, Inputs};
use crate::workspace::Expander;

/// What the first look read of each complete task's inputs, by the task's
/// index in the plan file: kept for the reuse pass only while nothing else
/// ran — a provider asked or an attempt reconciled drops it (`forget`).
pub(super) type FirstLook = HashMap<usize, Expanded>;

impl Runner<'_> {
    /// Check every input of a plan that needs it (`Inputs::ToCheck`): the
    /// first one outside the workspace refuses the run with the load's
    /// error (INPUT_OUTSIDE_WORKSPACE at `$.tasks[i].inputs[j]`). A task
    /// the reuse pass will observe is expanded as observing does (a `statx`
    /// per file, kept); any other only checked (its folders' listings).
    /// Called once, at the run's start.
    pub(super) fn check_inputs(&mut self) -> Result<()> {
        if self.plan.inputs == Inputs::Checked {
            return Ok(());
        }
        let workspace = &self.plan.workspace;
        let mut expander = Expander::new(workspace).map_err(|why| plan::workspace_unusable(workspace, &why))?;
        let mut looked = FirstLook::new();
        for (i, task) in self.plan.file.tasks.iter().enumerate() {
            let observed = !self.shared
                && task.effect != Effect::External
                && self.states.get(&task.task_ref).is_some_and(|s| s.is_complete());
            if observed {
                let expanded = checkpoint::expand_inputs(&mut expander, task)
                    .map_err(|(j, why)| plan::input_refused(&self.plan.file, i, j, &why))?;
                looked.insert(i, expanded);
                continue;
            }
            for (j, input) in task.inputs.iter().enumerate() {
                expander.check(input).map_err(|why| plan::input_refused(&self.plan.file, i, j, &why))?;
            }
        }
        self.first_look = Some(looked);
        Ok(())
    }

    /// Something other than this run's ledger reads ran since the first
    /// look (a provider was asked, an attempt reconciled): what it read of
    /// the files may be stale, so the reuse pass observes them afresh.
    pub(super) fn forget_first_look(&mut self) {
        self.first_look = None;
    }
}
