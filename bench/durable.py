"""Workload (a), the durable step, and (b), the disk's floor.

(a) A chain of N steps that each do nothing, run by the engine (builtin
noop tasks), by DBOS Transact (a workflow of N `@DBOS.step` calls, SQLite
system database) and by LangGraph (a chain of N nodes, SqliteSaver). Each
run is a whole process in a fresh folder; per step = (wall at N+1 steps -
wall at 1 step) / N, paired within a repeat, so start-up, plan or graph
registration and shutdown cancel out.

(b) The same disk's floor: a write + fsync loop, and a loop of one-row
SQLite commits in WAL mode with synchronous=FULL (what each of the engine's
intent and receipt commits is at least)."""

import json
import os
import sqlite3
import time

from common import Failed, Scratch, log, run_child, summary, tail, store_of
from plans import write_plan

BUILTIN_MISSING = "engine lacks the builtin provider"


def builtin_support(engine, tmpdir):
    """Does the engine under test accept `kind: "builtin"`? `engine check` on
    a one-task plan. Returns (supported, what `engine check` said)."""
    with Scratch(tmpdir) as ws:
        write_plan(os.path.join(ws, "plan.json"), "chain", 1, "builtin")
        out = os.path.join(ws, "check.out")
        _, code, _, _ = run_child([engine, "check", "plan.json"], ws, out)
        said = " ".join(tail(out, 3).split())
        return code == 0, f"`engine check` of a one-task builtin plan exited {code}" + (f": {said}" if said else "")


class System:
    """One way of running a chain of `steps` steps as a whole process."""

    def __init__(self, name, label, argv_of, check=None, skip=None, standin=False):
        self.name, self.label = name, label
        self.argv_of = argv_of  # (steps, folder) -> argv, run with cwd=folder
        self.check = check  # (steps, output path) -> None or raises Failed
        self.skip = skip  # why this system is not measured, or None
        self.standin = standin


def engine_system(name, label, engine, provider, jobs, skip=None, standin=False, effect="none"):
    def argv_of(steps, ws):
        write_plan(os.path.join(ws, "plan.json"), "chain", steps, provider, effect=effect)
        return [engine, "run", "plan.json", "--jobs", str(jobs),
                "--store", store_of(ws)]

    def check(steps, out):
        with open(out, errors="replace") as f:
            said = f.read().count("succeeded")
        if said < steps:
            raise Failed(f"{name}: only {said} of {steps} task lines say succeeded:\n{tail(out)}")

    return System(name, label, argv_of, check, skip, standin)


def python_system(name, label, python, script, extra=(), skip=None):
    def argv_of(steps, ws):
        return [python, script, str(steps), ws, *extra]

    def check(steps, out):
        with open(out, errors="replace") as f:
            last = (f.read().strip().splitlines() or [""])[-1]
        try:
            if json.loads(last).get("steps") != steps:
                raise ValueError(last)
        except ValueError:
            raise Failed(f"{name}: no result line for {steps} steps:\n{tail(out)}")

    return System(name, label, argv_of, check, skip)


def systems(args, env, builtin_ok):
    here = os.path.dirname(os.path.abspath(__file__))
    py = env.get("python")
    out = [
        engine_system("engine", "engine, builtin noop tasks", args.engine, "builtin", args.jobs,
                      skip=None if builtin_ok else BUILTIN_MISSING),
        # The same durability as DBOS's and SqliteSaver's commits: a step
        # declared `external` has its intent flushed (synchronous=FULL)
        # before the call (docs/guarantees.md), where a `none` step's
        # commits wait for no disk.
        engine_system("engine-flushed", "engine, builtin noop tasks declared effect external (intent flushed: FULL)",
                      args.engine, "builtin", args.jobs, skip=None if builtin_ok else BUILTIN_MISSING,
                      effect="external"),
        engine_system("engine-command", "engine, command `true` tasks (STAND-IN: a process per step)",
                      args.engine, "command", args.jobs, standin=True),
        python_system("dbos", "DBOS Transact, @DBOS.step, SQLite system database", py,
                      os.path.join(here, "baselines", "dbos_chain.py"),
                      skip=env.get("missing", {}).get("dbos")),
        python_system("langgraph", "LangGraph, chain of N nodes, SqliteSaver, durability=sync", py,
                      os.path.join(here, "baselines", "langgraph_chain.py"), ["sync", "chain"],
                      skip=env.get("missing", {}).get("langgraph")),
        python_system("langgraph-loop", "LangGraph, one node looped N times, SqliteSaver, durability=sync", py,
                      os.path.join(here, "baselines", "langgraph_chain.py"), ["sync", "loop"],
                      skip=env.get("missing", {}).get("langgraph")),
        python_system("langgraph-async", "LangGraph, chain of N nodes, SqliteSaver, durability=async (its default)",
                      py, os.path.join(here, "baselines", "langgraph_chain.py"), ["async", "chain"],
                      skip=env.get("missing", {}).get("langgraph")),
    ]
    wanted = args.durable_systems
    return [s for s in out if s.name in wanted]


def one_run(args, system, steps):
    with Scratch(args.tmpdir) as ws:
        # Beside the folder, not in it: the engine looks at its workspace
        # around each process task, and an output file growing there while
        # a task runs is that task's undeclared write (as in dag.py).
        out = ws.rstrip("/") + ".out"
        try:
            argv = system.argv_of(steps, ws)
            wall, code, rss, cpu = run_child(argv, ws, out)
            if code != 0:
                raise Failed(f"{system.name} with {steps} steps exited {code}:\n{tail(out)}")
            if system.check:
                system.check(steps, out)
            return wall, rss, cpu
        finally:
            if os.path.exists(out):
                os.unlink(out)


def bench_durable(args, env, builtin_ok):
    """Every system at every N, repeats interleaved so that a busy moment of
    the machine falls on all of them alike. A system stops repeating once its
    runs at this N have taken args.system_seconds (a LangGraph chain of
    10,000 nodes takes minutes a run); its row says how many it made."""
    rows = []
    for n in args.step_sizes:
        repeats = args.repeats or (3 if args.quick else (5 if n <= 1000 else 3))
        live = []
        for s in systems(args, env, builtin_ok):
            rec = {"system": s.name, "label": s.label, "n": n, "standin": s.standin, "repeats": repeats}
            if s.skip:
                rec["skipped"] = s.skip
                log(f"durable step {s.name} N={n}: skipped: {s.skip}")
            else:
                rec.update({"wall_1_s": [], "wall_n1_s": [], "rss_1_kb": [], "rss_n1_kb": [],
                            "cpu_1_s": [], "cpu_n1_s": [], "per_step_ms": [], "cpu_per_step_ms": []})
                live.append((s, rec))
            rows.append(rec)
        spent = {s.name: 0.0 for s, _ in live}
        for r in range(repeats):
            for s, rec in live:
                if rec.get("failed") or spent[s.name] > args.system_seconds:
                    continue
                try:
                    w1, m1, c1 = one_run(args, s, 1)
                    wn, mn, cn = one_run(args, s, n + 1)
                except Failed as e:
                    rec["failed"] = str(e)
                    log(f"durable step {s.name} N={n}: FAILED: {e}")
                    continue
                spent[s.name] += w1 + wn
                for key, v in (("wall_1_s", w1), ("wall_n1_s", wn), ("rss_1_kb", m1), ("rss_n1_kb", mn),
                               ("cpu_1_s", c1), ("cpu_n1_s", cn), ("per_step_ms", (wn - w1) / n * 1000),
                               ("cpu_per_step_ms", (cn - c1) / n * 1000)):
                    rec[key].append(v)
                log(f"  durable {s.name:15} N={n:<6} #{r + 1}: 1 step {w1:6.2f}s, {n + 1} steps {wn:7.2f}s "
                    f"({mn / 1024:6.1f} MiB) -> {(wn - w1) / n * 1000:6.3f} ms/step")
        for _, rec in live:
            rec["repeats_done"] = len(rec["per_step_ms"])
            for key in ("per_step_ms", "cpu_per_step_ms", "wall_1_s", "wall_n1_s", "rss_n1_kb"):
                rec[key] = summary(rec[key])
    return rows


# ---------------------------------------------------------------- the floor

def fsync_loop(folder, ops):
    """Per-operation seconds of `ops` appends of 64 bytes, each followed by
    fsync, to one file."""
    path = os.path.join(folder, "fsync.dat")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"\0" * 64)
        os.fsync(fd)
        t0 = time.perf_counter()
        for _ in range(ops):
            os.write(fd, b"x" * 64)
            os.fsync(fd)
        return (time.perf_counter() - t0) / ops
    finally:
        os.close(fd)


def sqlite_loop(folder, ops):
    """Per-operation seconds of `ops` transactions of one 100-byte row each,
    journal_mode=WAL, synchronous=FULL (an fsync of the WAL per commit)."""
    db = sqlite3.connect(os.path.join(folder, "floor.db"), isolation_level=None)
    try:
        if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise Failed("SQLite did not switch to WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        row = b"r" * 100
        t0 = time.perf_counter()
        for _ in range(ops):
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (v) VALUES (?)", (row,))
            db.execute("COMMIT")
        return (time.perf_counter() - t0) / ops
    finally:
        db.close()


def bench_floor(args):
    ops = 300 if args.quick else 1000
    repeats = args.repeats or (3 if args.quick else 5)
    rec = {"ops_per_repeat": ops, "repeats": repeats, "sqlite_version": sqlite3.sqlite_version,
           "fsync_ms": [], "sqlite_commit_ms": []}
    for r in range(repeats):
        with Scratch(args.tmpdir) as ws:
            f = fsync_loop(ws, ops) * 1000
            s = sqlite_loop(ws, ops) * 1000
        rec["fsync_ms"].append(f)
        rec["sqlite_commit_ms"].append(s)
        log(f"  floor #{r + 1}: write+fsync {f:.3f} ms, SQLite WAL+FULL commit {s:.3f} ms")
    rec["fsync_ms"] = summary(rec["fsync_ms"])
    rec["sqlite_commit_ms"] = summary(rec["sqlite_commit_ms"])
    return rec
