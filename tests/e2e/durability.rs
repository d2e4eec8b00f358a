//! Issue 38: durability follows the effect. The records of a free `none` or
//! `local` task (intent, dispatch mark, receipt) are committed with
//! `synchronous=NORMAL` — durable across a crash of the engine, not a power
//! loss — and an `external` one's intent is flushed before its call. Judged
//! from the kernel's side: `strace` counts the `fsync`/`fdatasync` calls the
//! real binary makes on the store's files during a run.

use serde_json::{json, Value};

use super::common::*;

/// A chain of `n` builtin noop tasks of this effect (and cost).
fn chain(n: usize, effect: &str, cost: f64) -> Value {
    let tasks: Vec<Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> = if i == 0 { vec![] } else { vec![format!("t{}", i - 1)] };
            json!({"ref": format!("t{i}"), "provider": "b", "action": {"op": "noop"}, "effect": effect,
                   "cost": cost, "depends_on": deps})
        })
        .collect();
    json!({
        "version": 1,
        "goal": {"id": "g", "statement": "a chain of builtin steps"},
        "budgets": {"max_cost": 1000, "max_provider_calls": 1000},
        "providers": {"b": {"kind": "builtin"}},
        "tasks": tasks,
    })
}

/// The flushes (`fsync`, `fdatasync`) the engine made on files of its store's
/// folder during `engine run plan.json` of `plan`, in a fresh workspace.
fn flushes_of_a_run(plan: &Value) -> usize {
    let f = flushes_by_thread(plan);
    f.writer + f.folder
}

/// A run's flushes on its store's files: by every thread but the
/// checkpointer (`writer`), by the checkpointer (`folder`; of the store
/// file, `folder_store`: one a pass that left the WAL wholly folded), and the
/// store-file flushes by every thread but the checkpointer told apart by
/// what came before each: `tails`, a flush by the checkpointer since the
/// last such one (the writer folding what a fold handed it); `alone`, none
/// (the lease's, the release's, or a checkpoint of the writer's own).
struct Flushes {
    writer: usize,
    folder: usize,
    folder_store: usize,
    tails: usize,
    alone: usize,
}

fn flushes_by_thread(plan: &Value) -> Flushes {
    let ws = Ws::new();
    ws.write_plan("plan.json", plan);
    // `prctl`: a thread names itself so (the checkpointer, "ledger-fold").
    let filter = ["-y", "-e", "trace=fsync,fdatasync,prctl"];
    let traced = traced_run(&ws, &["run", "plan.json", "--jobs", "2"], &filter);
    assert!(traced.lines().any(|l| l.contains("sync(")), "strace saw the engine flush nothing at all:\n{traced}");
    count_flushes(&traced, &ws.store_dir().display().to_string())
}

/// [`Flushes`] in an `strace -f -y` log, in the order it logged them.
fn count_flushes(traced: &str, store: &str) -> Flushes {
    let tid = |l: &str| l.split_whitespace().next().unwrap_or("").to_string();
    let folders: Vec<String> =
        traced.lines().filter(|l| l.contains("PR_SET_NAME") && l.contains("\"ledger-fold\"")).map(tid).collect();
    let mut f = Flushes { writer: 0, folder: 0, folder_store: 0, tails: 0, alone: 0 };
    let mut folded_since = false;
    for line in traced.lines().filter(|l| l.contains("sync(") && l.contains(store)) {
        if folders.contains(&tid(line)) {
            f.folder += 1;
            f.folder_store += usize::from(line.contains("engine.db>"));
            folded_since = true;
            continue;
        }
        f.writer += 1;
        if line.contains("engine.db>") {
            *(if std::mem::take(&mut folded_since) { &mut f.tails } else { &mut f.alone }) += 1;
        }
    }
    f
}

/// Flushes a task adds: (flushes of a chain of `long` − of `short`) tasks.
fn flushes_per_task(effect: &str, cost: f64) -> f64 {
    let (short, long) = (4, 24);
    let (a, b) = (flushes_of_a_run(&chain(short, effect, cost)), flushes_of_a_run(&chain(long, effect, cost)));
    (b as f64 - a as f64) / (long - short) as f64
}

#[test]
fn a_chain_of_none_or_local_tasks_waits_for_no_disk_an_external_one_flushes_each_intent() {
    for effect in ["none", "local"] {
        let per_task = flushes_per_task(effect, 0.0);
        assert!(per_task <= 0.1, "effect {effect}: {per_task} flushes a task, want none");
    }
    // An external task's intent (and its receipt, with the next intent)
    // is flushed before the call: at least one flush a task.
    let external = flushes_per_task("external", 0.0);
    assert!(external >= 1.0, "effect external: {external} flushes a task, want at least 1");
    // A paid task is owed the flush whatever its effect.
    let paid = flushes_per_task("none", 0.5);
    assert!(paid >= 1.0, "a paid none task: {paid} flushes a task, want at least 1");
}

/// Issue 38, fourth round: SQLite folds its WAL into the store file (a
/// checkpoint, three flushes whatever the commit's durability) once the WAL
/// holds `wal_autocheckpoint` pages; at SQLite's 1,000 a chain of free tasks
/// waited for one every fifty tasks or so. Thirteenth round: the checkpointer
/// thread folds it every 2,000 pages (`fold.rs`), off the engine's thread,
/// and the writer's own checkpoint waits for 10,000. Fourteenth round: the
/// checkpointer hands the frames commits added during its passes to the
/// writer, which folds them (the WAL and the store file flushed) so that
/// its next commit starts the WAL again. A chain of 200 builtin steps
/// (about 2,400 pages: one fold) flushes the store file on every thread but
/// the checkpointer only as a chain of 4 does (the taking and giving back
/// of the store) and once after each fold of the checkpointer's (its tail);
/// and flushes no more than a chain of 4 beside one flush of the WAL's
/// header a fold the checkpointer finished (when the writer starts the WAL
/// again) and three a tail (the WAL, the store file, the header).
#[test]
fn a_chain_of_free_tasks_waits_only_for_the_tail_of_a_fold() {
    let short = flushes_by_thread(&chain(4, "none", 0.0));
    let long = flushes_by_thread(&chain(200, "none", 0.0));
    assert_eq!(short.tails, 0, "4 free tasks reach no fold");
    assert!(
        long.alone <= short.alone,
        "200 free tasks flushed the store file {} times with no fold before, 4 did {}: a checkpoint of the writer's own",
        long.alone,
        short.alone
    );
    let (s, l, folds, tails) = (short.writer, long.writer, long.folder_store, long.tails);
    assert!(tails <= 2, "the writer folded {tails} tails in 200 free tasks (about one fold)");
    assert!(
        l <= s + folds + 3 * tails,
        "200 free tasks flushed {l} times beside {folds} folds and {tails} tails, 4 flushed {s}: a checkpoint on \
         the way"
    );
}
