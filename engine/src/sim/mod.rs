//! The deterministic simulator: the whole engine in one thread, every
//! source of chance drawn from one seed. A seed makes a plan (`plan`) and
//! a world (`world`): providers that answer, fail, refuse, lose answers
//! after or before their effect, answer without it, or outlast the task's
//! deadline; checks that pass or fail; a person's stop signal; one clock.
//! A person (`session`) then runs the plan and acts on what each run waits
//! on — settle, approve, retry, repair, revise, raise a budget, give a
//! request id twice — through the command line's own dispatch, each
//! command a simulated engine process that may die at any step: a commit,
//! a crash point, any action of its run — and a death may be a power loss
//! (`disk`), after which the store holds only what was flushed
//! (`synchronous=FULL` commits) and a prefix of what followed. The real core, driver and store
//! code run throughout (SQLite on a file under `target/`, never `/dev/shm`);
//! only the world is made up. After every step the invariants are checked
//! (`checks`); a seed that breaks one is reproduced by its number alone.
//!
//! Part of the engine library, run only by the simulator's package
//! (`simulator/`, `engine-simulator`: `cargo test -p engine-simulator
//! --test simulation`, `cargo run -p engine-simulator -- --seed N --steps
//! M`): it arms the engine's dormant hooks (`failpoint::sim`, `clock::sim`,
//! `run::world::simulated`) on its own thread; the `engine` binary never
//! calls it, so none of it is linked in there (tests/e2e/tested_binary.rs).

mod checks;
/// The core-model simulation: the run core alone against an in-memory
/// ledger and a seeded world (no SQLite), for most seeds.
pub mod core;
/// The simulated disk (what a power loss keeps): the store reports its commits to it.
pub(crate) mod disk;
mod files;
mod plan;
/// Public for the simulator's suite (`tests/simulation/`), which tests it.
pub mod rng;
mod session;
mod world;

use std::path::PathBuf;

pub use crate::failpoint::Fault;
pub use checks::Finding;

/// The simulation's first moment (2027-01-15, UTC): its clock starts here
/// (a story's times count from it, in milliseconds).
pub const EPOCH_MS: i64 = 1_800_000_000_000;

/// One simulation: a seed, how many steps it may take, the faults planted.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub steps: u64,
    pub faults: Vec<Fault>,
    /// Where each seed makes its folder (best on a memory file system).
    pub base: PathBuf,
}

impl Config {
    pub fn new(seed: u64, steps: u64) -> Config {
        Config { seed, steps, faults: Vec::new(), base: default_base() }
    }
}

/// Where seeds make their folders unless told: `ENGINE_SIM_DIR`, else
/// `sim/` beside the build's `target/` folder. Never under the temporary
/// folder nor `/dev/shm`: a provider may write there, and the engine
/// refuses a store a provider could write.
pub fn default_base() -> PathBuf {
    if let Some(dir) = std::env::var_os("ENGINE_SIM_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe.ancestors().find(|p| p.file_name().is_some_and(|n| n == "target"));
    target.map_or_else(|| PathBuf::from("sim"), |t| t.join("sim"))
}

/// What one seed did, and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub steps_max: u64,
    pub faults: Vec<Fault>,
    /// Steps taken: every action of every run, every commit, every crash
    /// point, every command.
    pub steps: u64,
    pub commands: u64,
    pub crashes: u64,
    /// Of those, deaths that were a power loss taking unflushed commits.
    pub power_losses: u64,
    /// Calls the providers received.
    pub deliveries: u64,
    /// Of those, calls that carried a person's answers (`engine answer`).
    pub answered: u64,
    /// Dependants kept by early cutoff (`UPSTREAM_OUTPUT_UNCHANGED`), and
    /// those run again because an upstream's outputs changed.
    pub kept_by_cutoff: u64,
    pub ran_on_new_outputs: u64,
    pub findings: Vec<Finding>,
    /// The last things that happened, for a finding's story.
    pub trace: Vec<String>,
}

impl Report {
    /// The one line that runs this seed again, from the repository's root.
    pub fn reproduction(&self) -> String {
        let faults: String = self.faults.iter().map(|f| format!(" --fault {}", f.name())).collect();
        format!("cargo run -p engine-simulator -- --seed {} --steps {}{faults} --trace", self.seed, self.steps_max)
    }

    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Run one seed.
pub fn simulate(config: &Config) -> Report {
    session::simulate(config)
}
