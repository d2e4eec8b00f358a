//! The run loop: reconcile in-doubt attempts, re-check completions, run
//! ready tasks (intent → dispatch → receipt → validations), then the goal's
//! acceptance checks, and the verdict.
//!
//! Three parts, each knowing only the ones below it:
//!
//! - `driver` steps the core and performs what it asks — on the ledger
//!   (one transaction per write), on the workspace, on the world — and
//!   answers it; it decides nothing.
//! - `world` is what the run acts on besides its ledger and workspace:
//!   providers, checks' processes, signals, time, the person watching;
//!   `live` is the real one.
//! - `core` is the run as a state machine: events in, actions out, no I/O,
//!   no clock, no thread inside. Every judgement it makes is a pure
//!   function of `decide/` (the in-doubt resolver, the scheduler, grouping,
//!   a stop's resolution); the ledger's own are made in the transactions
//!   the driver runs (the call-site gate, classification, reuse, the
//!   verdict).
//!
//! Beneath them: what a run is asked (`asked`), its checks and looks as
//! data (`check`, `looked`), its constraints (`constraints`), its report
//! (`report`), its progress (`progress`), its sandboxes and providers, the
//! outputs carried between workspaces (`outputs`, `materialize`), and the
//! questions it holds open for a person during a call (`held`).

pub(crate) mod asked;
pub(crate) mod check;
pub(crate) mod constraints;
pub mod core;
mod driver;
mod fresh;
mod held;
pub mod holds;
pub mod identity;
mod live;
pub mod looked;
mod materialize;
pub mod orphans;
mod outputs;
pub mod progress;
pub mod provider;
mod report;
pub mod sandboxes;
pub mod world;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::Result;
use crate::ids::Revision;
use crate::plan::Plan;
use crate::store::LeaseGuard;
pub use asked::{AcrossToolChange, AnswerExpiry, Answering, Asked, Repair, Rerun};
pub use constraints::Tally;
pub use driver::dry::{walk as dry_walk, DryRun, DryTask};
pub use fresh::completion;
use progress::{Sink, Update};
pub use report::{
    AcceptanceLine, Awaiting, AwaitingInput, ConstraintLine, HeldTask, PlanFileChanged, RunReport, SameRequestWait,
    StopReport, TaskLine, UnknownOp,
};
pub use sandboxes::Sandboxes;

/// Run revision `revision` of `plan` under `ledger`'s lease, on a
/// current-thread runtime, telling `progress` what happens as it happens.
pub fn execute(
    ledger: &mut LeaseGuard,
    plan: &Plan,
    revision: Revision,
    jobs: usize,
    asked: Asked,
    sandboxes: Sandboxes,
    progress: Arc<dyn Sink>,
) -> Result<RunReport> {
    if let Some(mut world) = world::simulated::world(plan) {
        let run = driver::drive(ledger, plan, (revision, jobs, asked), &mut *world, (sandboxes.checks(), None));
        let report = world::simulated::block_on(run)
            .unwrap_or_else(|| Err(crate::error::Error::internal("the simulated world left the run waiting")));
        progress.update(&Update::Ended);
        return report;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let checks_sandbox = sandboxes.checks();
    // A question an MCP server puts during a call may be held open for a
    // person (`ask.wait_seconds`): the run's side of it.
    let person = held::Asker::for_run(ledger, plan);
    let mut world = live::Live::new(plan, sandboxes, progress.clone(), person)?;
    // Traced when this process exports a trace (`--otlp`, the OpenTelemetry
    // variables): the driver feeds the run's spans.
    let tracing = crate::trace::for_run();
    let report =
        rt.block_on(driver::drive(ledger, plan, (revision, jobs, asked), &mut world, (checks_sandbox, tracing)));
    // Every path out of the run ends what the providers kept for it (an
    // MCP server's process group, an HTTP session), the failed ones too.
    rt.block_on(world::World::shutdown(&mut world));
    progress.update(&Update::Ended);
    report
}

/// Outside a run (`engine revise`): the inventories of the MCP servers
/// whose tasks a revision may reuse (`live::list_now`; under the
/// simulator, its world's servers).
pub fn list_tools_now(
    plan: &Plan,
    secrets: &[String],
    sandboxes: &Sandboxes,
) -> Result<BTreeMap<String, crate::decide::tools::Inventory>> {
    if let Some(mut world) = world::simulated::world(plan) {
        let named = live::reusable_servers(plan);
        if named.is_empty() {
            return Ok(BTreeMap::new());
        }
        let listed = world::simulated::block_on(world.list_tools(&named)).unwrap_or_default();
        return Ok(listed.into_iter().filter_map(|(name, inv)| inv.ok().map(|i| (name, i))).collect());
    }
    live::list_now(plan, secrets, sandboxes)
}
