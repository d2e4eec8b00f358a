//! Crash points for tests: the engine SIGKILLs itself at a named point, so
//! a test can restart it and check what survived. Testing aids, documented
//! in docs/testing.md. Provider processes never see the variables (the command
//! provider, which also starts MCP servers and checks, drops `ENGINE_*`).
//!
//! - `ENGINE_FAILPOINT=<name>`: at one of the named points of an attempt.
//! - `ENGINE_CRASH_AFTER_COMMITS=N`: right after this process's N-th
//!   committed `Store::write` transaction (counted per process; the lease's
//!   own acquire and release are not `Store::write`s), so a test can sweep
//!   N = 1, 2, … and crash after every commit a run makes.
//! - `ENGINE_CHECK_COUNTERS` (set): after each run the budget counters are
//!   recounted from the attempts they count and the engine panics on a
//!   difference, as a debug build always does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The named points, in the order an attempt passes them; then the points
/// of a new store's creation (built under its temporary name; linked into
/// place; in place, before its mark exists).
pub const POINTS: &[&str] = &[
    "after_intent",
    "after_dispatch",
    "after_handle",
    "after_receipt",
    "after_receipt_commit",
    "store_built",
    "store_linked",
    "store_placed",
];

/// The variable that turns on the budget counters' recount after a run.
pub const CHECK_COUNTERS: &str = "ENGINE_CHECK_COUNTERS";

/// The variable that arms the commit counter.
pub const CRASH_AFTER_COMMITS: &str = "ENGINE_CRASH_AFTER_COMMITS";

pub fn hit(name: &str) {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    if sim::active() {
        sim::step();
        return;
    }
    if std::env::var("ENGINE_FAILPOINT").is_ok_and(|v| v == name) {
        die(&format!("failpoint {name}"));
    }
}

/// Called by `Store::write` after each commit.
pub fn committed() {
    if sim::active() {
        sim::committed();
        return;
    }
    let Some(limit) = crash_after_commits() else { return };
    let n = COMMITS.fetch_add(1, Ordering::SeqCst) + 1;
    if n == limit {
        die(&format!("{CRASH_AFTER_COMMITS}={limit}: commit {n} done"));
    }
}

static COMMITS: AtomicU64 = AtomicU64::new(0);

/// `N` from the environment, read once (`None`: unset, 0, or not a number —
/// the last said once on stderr, so a typo does not look like a clean run).
fn crash_after_commits() -> Option<u64> {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let raw = std::env::var(CRASH_AFTER_COMMITS).ok()?;
        match raw.trim().parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                crate::say_line!("engine: ignoring {CRASH_AFTER_COMMITS}={raw:?}: not a whole number");
                None
            }
        }
    })
}

fn die(why: &str) -> ! {
    crate::say_line!("engine: {why}: killing this process (SIGKILL)");
    // SAFETY: sending a signal to ourselves has no memory-safety effect.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; this line is never reached.
    std::process::abort();
}

/// The simulator's crash points and planted faults (`sim`), for one
/// thread: a simulated engine process dies at a chosen step — a commit, a
/// named point, an action of its run — and from then on writes nothing.
/// Compiled into every build and dormant unless the simulator armed them
/// on this thread (`sim::begin_process`, `sim::plant`: called only by
/// `engine::sim`, which the `engine` binary never calls, so neither is in
/// it — tests/e2e/tested_binary.rs); until then each hook is one read of
/// this thread's state: no process is active, no fault is planted.
pub use sim::{crashed, fault, refuse_if_dead, Fault};

pub mod sim {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeSet;

    use crate::error::{Error, Result};

    /// A fault planted in the engine's own code, switched on for the
    /// simulator only; each breaks one invariant the simulator checks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Fault {
        /// A held call is handed to its provider before its group's commit:
        /// a send without a committed intent.
        SendBeforeCommit,
        /// A call is handed to its provider twice: a second send of one try.
        SendTwice,
        /// After a restart, an attempt nobody can settle is given up for a
        /// new try, whatever its effect: a re-send without a person's act.
        ResendOnRestart,
        /// The gate does not check the provider-call budget.
        SkipCallBudget,
        /// The verdict forgets the unknown outcomes: satisfied over an unknown.
        SatisfiedOverUnknown,
        /// Tool authority forgets a server whose tools could not be read:
        /// its tool is called with no inventory.
        SendWithoutInventory,
        /// The engine answers an MCP server's question on its own: a call
        /// carries answers no person recorded.
        AnswerOnItsOwn,
        /// Every intent is committed `synchronous=NORMAL`, an external or
        /// paid one too: a power loss can take it after its call was sent.
        ExternalIntentNormal,
        /// The scheduler forgets a person's holds: a held task is started.
        StartHeldTask,
        /// The gate weighs every approval as unexpired: an approval past
        /// its time pays for a call.
        SpendExpiredApproval,
        /// `engine rerun` makes every task of the plan run again, not only
        /// the chosen one (and its dependants with `--downstream`).
        RerunEverything,
        /// The gate counts the attempts a person's stop cancelled against
        /// `max_attempts_per_task`.
        StopConsumesAttempt,
        /// The reuse pass keeps a completion whose tool changed, with no
        /// person's act (`--reuse-across-tool-change`).
        KeepChangedTool,
        /// Early cutoff keeps a dependant whose upstream ran again with
        /// changed outputs, as if they were byte-identical.
        CutoffIgnoresOutputs,
    }

    impl Fault {
        pub const ALL: [Fault; 14] = [
            Fault::SendBeforeCommit,
            Fault::SendTwice,
            Fault::ResendOnRestart,
            Fault::SkipCallBudget,
            Fault::SatisfiedOverUnknown,
            Fault::SendWithoutInventory,
            Fault::AnswerOnItsOwn,
            Fault::ExternalIntentNormal,
            Fault::StartHeldTask,
            Fault::SpendExpiredApproval,
            Fault::RerunEverything,
            Fault::StopConsumesAttempt,
            Fault::KeepChangedTool,
            Fault::CutoffIgnoresOutputs,
        ];

        pub fn name(self) -> &'static str {
            match self {
                Fault::SendBeforeCommit => "send-before-commit",
                Fault::SendTwice => "send-twice",
                Fault::ResendOnRestart => "resend-on-restart",
                Fault::SkipCallBudget => "skip-call-budget",
                Fault::SatisfiedOverUnknown => "satisfied-over-unknown",
                Fault::SendWithoutInventory => "send-without-inventory",
                Fault::AnswerOnItsOwn => "answer-on-its-own",
                Fault::ExternalIntentNormal => "external-intent-normal",
                Fault::StartHeldTask => "start-held-task",
                Fault::SpendExpiredApproval => "spend-expired-approval",
                Fault::RerunEverything => "rerun-everything",
                Fault::StopConsumesAttempt => "stop-consumes-attempt",
                Fault::KeepChangedTool => "keep-changed-tool",
                Fault::CutoffIgnoresOutputs => "cutoff-ignores-outputs",
            }
        }

        pub fn named(name: &str) -> Option<Fault> {
            Fault::ALL.into_iter().find(|f| f.name() == name)
        }
    }

    thread_local! {
        static FAULTS: RefCell<BTreeSet<Fault>> = const { RefCell::new(BTreeSet::new()) };
        /// Steps of this process so far, and the one it dies at.
        static STEPS: Cell<u64> = const { Cell::new(0) };
        static DIES_AT: Cell<Option<u64>> = const { Cell::new(None) };
        static DEAD: Cell<bool> = const { Cell::new(false) };
        /// A simulated process runs on this thread (else the engine's own
        /// crash points act as in any build).
        static ACTIVE: Cell<bool> = const { Cell::new(false) };
        /// Commits made on this thread (any process).
        static COMMITS: Cell<u64> = const { Cell::new(0) };
    }

    /// Is `fault` planted on this thread?
    pub fn fault(fault: Fault) -> bool {
        FAULTS.with(|f| f.borrow().contains(&fault))
    }

    /// Plant these faults on this thread (and no other). Never inlined:
    /// a caller keeps its symbol (tests/e2e/tested_binary.rs looks for it).
    #[inline(never)]
    pub fn plant(faults: &[Fault]) {
        FAULTS.with(|f| *f.borrow_mut() = faults.iter().copied().collect());
    }

    /// A new process begins on this thread; it dies at step `dies_at`
    /// (`None`: it lives until it ends). Never inlined: a caller keeps its
    /// symbol (tests/e2e/tested_binary.rs looks for it).
    #[inline(never)]
    pub fn begin_process(dies_at: Option<u64>) {
        ACTIVE.with(|a| a.set(true));
        STEPS.with(|s| s.set(0));
        DIES_AT.with(|d| d.set(dies_at));
        DEAD.with(|d| d.set(false));
    }

    /// The process is over (it ended, or it died): nothing on this thread
    /// is simulated until the next `begin_process`.
    pub fn end_process() {
        ACTIVE.with(|a| a.set(false));
        DIES_AT.with(|d| d.set(None));
        DEAD.with(|d| d.set(false));
    }

    /// Does a simulated process run on this thread?
    pub fn active() -> bool {
        ACTIVE.with(Cell::get)
    }

    /// One more step of this process: a crash opportunity. `true`: the
    /// process is dead (now, or already).
    pub fn step() -> bool {
        if crashed() {
            return true;
        }
        let n = STEPS.with(|s| {
            let n = s.get() + 1;
            s.set(n);
            n
        });
        if DIES_AT.with(Cell::get) == Some(n) {
            DEAD.with(|d| d.set(true));
        }
        crashed()
    }

    /// Steps this process took so far.
    pub fn steps() -> u64 {
        STEPS.with(Cell::get)
    }

    /// A commit was made: counted, and a crash opportunity. The commit
    /// happened: the caller goes on (a simulated death is not a real one),
    /// and every later write is refused.
    pub fn committed() {
        COMMITS.with(|c| c.set(c.get() + 1));
        step();
    }

    /// Commits made on this thread so far.
    pub fn commits() -> u64 {
        COMMITS.with(Cell::get)
    }

    /// Has this thread's simulated process died?
    pub fn crashed() -> bool {
        active() && DEAD.with(Cell::get)
    }

    /// A dead process writes nothing: every write after its death is
    /// refused (it never happened).
    pub fn refuse_if_dead() -> Result<()> {
        match crashed() {
            true => Err(Error::internal("the simulated engine process died")),
            false => Ok(()),
        }
    }
}
