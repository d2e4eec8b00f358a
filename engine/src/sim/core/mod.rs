//! The core-model simulation: the real run core (`run::core`), with no
//! SQLite, no workspace, no process, against models of everything outside
//! it — an in-memory ledger (`ledger`: committed state apart from a group
//! not yet committed, `synchronous` NORMAL apart from FULL so a power loss
//! drops what was not flushed, claims always granted) and a seeded world
//! (`world`: answers, failures, refusals before dispatch, answers lost
//! after or before the effect, reads back, a person's stop). A seed draws
//! the plan the full-stack simulator would (`sim::plan`), the tasks a
//! person holds, and for each engine process where it dies: the core is
//! dropped at a request it asked (the request never performed) and a new
//! core starts from the ledger as committed — after a power loss, as
//! flushed — as a restarted engine would. The invariants (`checks`) are
//! checked as each request is performed.
//!
//! It models no person's act beyond a hold and its release (no settle,
//! approval, retry, repair, revision, answer, raise), one revision, one
//! worker, no workspace (nothing observed, protected, reused or cut off),
//! no process group; what the driver decides with SQLite (the verdict, a
//! receipt's judgement, the budget counters, `engine verify`) is the
//! full-stack simulator's to check (`sim::session`). A seed is about a
//! hundred requests and costs a small fraction of a full-stack seed
//! (docs/testing.md has both figures; how the seeds split is the lead's).

mod checks;
mod ledger;
mod port;
mod world;

use std::collections::BTreeSet;

use crate::error::Result;
use crate::ids::Revision;
use crate::plan::{Plan, PlanFile};
use crate::run::asked::Asked;
use crate::run::constraints::Guard;
use crate::run::core::{Core, Step};
use crate::sim::checks::Finding;
use crate::sim::rng::Rng;
use crate::sim::Fault;

pub use checks::NO_RESOLUTION_WITHOUT_EVIDENCE;
use ledger::Ledger;
use port::Model;
use world::World;

/// Engine processes a seed starts at most.
const PROCESSES: u64 = 6;
/// Requests one run may ask before it is called stuck.
const REQUESTS_MAX: u64 = 20_000;

/// What one seed did, and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub faults: Vec<Fault>,
    /// Engine processes started, of which died, and of those power losses.
    pub processes: u64,
    pub crashes: u64,
    pub power_losses: u64,
    /// Requests the cores asked, and calls handed to providers.
    pub requests: u64,
    pub sends: u64,
    pub findings: Vec<Finding>,
    /// The last things that happened, for a finding's story.
    pub trace: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// The one line that runs this seed again, from the repository's root.
    pub fn reproduction(&self) -> String {
        let faults: Vec<&str> = self.faults.iter().map(|f| f.name()).collect();
        let faults = match faults.is_empty() {
            true => String::new(),
            false => format!("SIM_CORE_FAULT={} ", faults.join(",")),
        };
        format!("SIM_CORE_SEED={} {faults}cargo test -p engine-simulator --test simulation core_model::", self.seed)
    }
}

/// Run one seed of the core-model simulation with `faults` planted.
pub fn simulate(seed: u64, faults: &[Fault]) -> Report {
    crate::failpoint::sim::plant(faults);
    let report = session(seed, faults);
    crate::failpoint::sim::plant(&[]);
    report
}

fn session(seed: u64, faults: &[Fault]) -> Report {
    let mut report = Report { seed, faults: faults.to_vec(), ..Report::default() };
    let mut rng = Rng::new(seed);
    let generated = crate::sim::plan::generate(&mut rng, seed);
    let plan = match load(generated.plan) {
        Ok(plan) => plan,
        Err(e) => {
            let detail = format!("the seed's plan does not load: {}", e.message);
            report.findings.push(Finding { invariant: crate::sim::checks::NO_INTERNAL_ERROR, detail });
            return report;
        }
    };
    let refs: Vec<String> = plan.file.tasks.iter().map(|t| t.task_ref.clone()).collect();
    let held: BTreeSet<String> = match rng.chance(20) {
        true => refs.get(rng.below(refs.len() as u64) as usize).cloned().into_iter().collect(),
        false => BTreeSet::new(),
    };
    let mut model = Model::new(&plan, &generated.traits, Ledger::new(&plan, held.clone()), World::new(rng.next()));
    if !held.is_empty() {
        model.tell(format!("a person holds {held:?}"));
    }
    for _ in 0..PROCESSES {
        report.processes += 1;
        let before = model.ledger.committed().tasks.clone();
        let dies_at = rng.chance(40).then(|| rng.range(1, 160));
        let jobs = rng.range(1, 3) as usize;
        let ended = run(&plan, &mut model, jobs, dies_at);
        let released = rng.chance(30) && !model.ledger.committed().held.is_empty();
        if let Some(died_at) = ended {
            crash(&mut model, &mut rng, &mut report, died_at);
        }
        if released {
            model.tell("a person releases the holds".into());
            model.ledger.person(|s| s.held.clear());
        }
        if ended.is_none() && !released && model.ledger.committed().tasks == before {
            break;
        }
    }
    report.requests = model.requests;
    report.sends = model.sends;
    report.findings = std::mem::take(&mut model.checks.findings);
    report.trace = std::mem::take(&mut model.trace);
    report
}

/// The seed's plan file, loaded as the engine loads any.
fn load(file: serde_json::Value) -> Result<Plan> {
    let file: PlanFile = serde_json::from_value(file).map_err(|e| crate::error::Error::internal(e.to_string()))?;
    Plan::from_file(file, std::env::temp_dir())
}

/// One engine process: a new core over the ledger as committed, stepped
/// until its run ends, or until it dies at request `dies_at` (never
/// performed). `Some(n)`: it died at request `n`.
fn run(plan: &Plan, model: &mut Model, jobs: usize, dies_at: Option<u64>) -> Option<u64> {
    model.world.restart();
    model.finished = false;
    if model.ledger.drop_group() {
        let detail = "the last run ended with a group of writes never committed".to_string();
        model.checks.findings.push(Finding { invariant: crate::sim::checks::NO_INTERNAL_ERROR, detail });
    }
    model.tell(format!("an engine process starts ({jobs} jobs)"));
    let mut core = Core::new(plan, Revision(1), jobs, Asked::default(), false, Guard::default());
    let mut n = 0;
    loop {
        match core.resume() {
            Step::Done(ended) => {
                end(model, &ended);
                return None;
            }
            Step::Act(action) => {
                n += 1;
                if dies_at == Some(n) || n > REQUESTS_MAX {
                    if n > REQUESTS_MAX {
                        let detail = format!("the run asked {REQUESTS_MAX} requests without ending");
                        model
                            .checks
                            .findings
                            .push(Finding { invariant: crate::sim::checks::NO_INTERNAL_ERROR, detail });
                    }
                    return Some(n);
                }
                let _answered = model.perform(action);
            }
        }
    }
}

fn end<T>(model: &mut Model, ended: &Result<T>) {
    let error = ended.as_ref().err().map(|e| (e.code, e.message.as_str()));
    model.tell(format!("the run ends: {error:?}"));
    let finished = model.finished;
    model.checks.on_end(error, finished);
}

/// The engine died at request `n`; a third of the time the power went
/// with it, taking the commits not flushed (some of them survive).
fn crash(model: &mut Model, rng: &mut Rng, report: &mut Report, n: u64) {
    report.crashes += 1;
    let unflushed = model.ledger.unflushed();
    let power_lost = unflushed > 0 && rng.chance(33);
    let kept = rng.below(unflushed as u64 + 1) as usize;
    let before = model.ledger.committed().clone();
    model.ledger.crash(power_lost, kept);
    match power_lost {
        true => {
            report.power_losses += 1;
            model.tell(format!(
                "the engine dies at request {n}, and the power with it ({kept} of {unflushed} unflushed commits kept)"
            ));
            model.checks.on_power_loss(&before, model.ledger.committed());
        }
        false => model.tell(format!("the engine dies at request {n}")),
    }
}
