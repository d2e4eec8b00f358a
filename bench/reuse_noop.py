#!/usr/bin/env python3
"""The no-op re-run: re-running an unchanged plan of TASKS tasks that
declare FILES input files in all, against GNU make's and ninja's no-op
rebuild of the same files (and, when it is installed, `dvc repro` of the
same stages), measured in the same session.

For each tool: a first (cold) build, then REPEATS no-op runs; the figure is
the median no-op wall time. The engine's no-op run makes the reuse decision
for every task (checkpoint observed through the file-state cache: stat
only when nothing changed) and dispatches nothing; the script checks that
from the ledger afterwards (one attempt per task, no `completion_stale`).

bench/bench.py (bench/run) uses the functions here for its no-op workload;
standalone:

usage: bench/reuse_noop.py [--tasks 1000] [--files 10000] [--repeats 7] [--engine PATH] [--dvc PATH] [--out DIR]
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from common import drop_store, run_child, store_of, satisfied_in, summary

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_tree(root, tasks, files):
    """FILES / TASKS settled input files per task under root/src."""
    per = files // tasks
    past = time.time() - 3600  # settled files: outside the cache's racy window
    layout = []
    for t in range(tasks):
        d = os.path.join(root, "src", "t%04d" % t)
        os.makedirs(d)
        names = []
        for f in range(per):
            rel = "src/t%04d/f%02d.txt" % (t, f)
            path = os.path.join(root, rel)
            with open(path, "w") as fh:
                fh.write("task %d file %d\n" % (t, f))
            os.utime(path, (past, past))
            names.append(rel)
        layout.append(names)
    return layout


def write_plan(root, layout):
    tasks = [{"ref": "t%04d" % i, "provider": "sh", "effect": "local", "inputs": names,
              "action": {"run": ["true"]}} for i, names in enumerate(layout)]
    plan = {"version": 1, "goal": {"id": "reuse-bench", "statement": "no-op rebuild"},
            "budgets": {"max_provider_calls": 10 ** 9, "max_attempts_per_task": 10},
            "providers": {"sh": {"kind": "command"}}, "tasks": tasks}
    with open(os.path.join(root, "plan.json"), "w") as fh:
        json.dump(plan, fh)


def write_make(root, layout):
    with open(os.path.join(root, "Makefile"), "w") as fh:
        stamps = " ".join("stamps/t%04d" % i for i in range(len(layout)))
        fh.write("all: %s\n\n" % stamps)
        for i, names in enumerate(layout):
            fh.write("stamps/t%04d: %s\n\t@mkdir -p stamps && touch $@\n\n" % (i, " ".join(names)))


def write_ninja(root, layout):
    with open(os.path.join(root, "build.ninja"), "w") as fh:
        fh.write("rule stamp\n  command = touch $out\n\n")
        for i, names in enumerate(layout):
            fh.write("build nstamps/t%04d: stamp %s\n" % (i, " ".join(names)))
        fh.write("\ndefault %s\n" % " ".join("nstamps/t%04d" % i for i in range(len(layout))))
    os.makedirs(os.path.join(root, "nstamps"), exist_ok=True)


def write_dvc(root, layout, dvc):
    """A DVC project without git: one stage per task, the task's files as
    deps, an uncached stamp as out."""
    lines = ["stages:"]
    for i, names in enumerate(layout):
        lines.append("  t%04d:" % i)
        lines.append("    cmd: touch dstamps/t%04d" % i)
        lines.append("    deps:")
        lines.extend("      - %s" % n for n in names)
        lines.append("    outs:")
        lines.append("      - dstamps/t%04d:" % i)
        lines.append("          cache: false")
    with open(os.path.join(root, "dvc.yaml"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.makedirs(os.path.join(root, "dstamps"), exist_ok=True)
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=root, env=dvc_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def dvc_env():
    return dict(os.environ, DVC_NO_ANALYTICS="1")


def tools_for(root, engine, ninja=True, dvc=None, jobs=2):
    """The command line of each tool, run with cwd=root."""
    tools = {"engine": [engine, "run", "plan.json", "--jobs", str(jobs), "--store", store_of(root)],
             "make": ["make", "-s", "-r", "-j%d" % jobs]}
    if ninja:
        tools["ninja"] = ["ninja", "-j%d" % jobs]
    if dvc:
        tools["dvc"] = [dvc, "repro", "-q"]
    return tools


def timed(cmd, cwd, peak=False):
    """(wall seconds, peak RSS KiB or None, output) of a command that must
    exit 0. The RSS needs a wrapper process (common.run_child), which would
    add a fork and exec to these short runs: only with peak=True."""
    env = dvc_env() if os.path.basename(cmd[0]) == "dvc" else None
    out_path = cwd.rstrip("/") + ".out"  # beside the tree: nothing in it changes
    wall, code, rss, _ = run_child(cmd, cwd, out_path, env, peak)
    with open(out_path, errors="replace") as fh:
        out = fh.read()
    os.unlink(out_path)
    if code != 0:
        sys.exit("command failed (%d): %s\n%s" % (code, " ".join(cmd), out[-2000:]))
    return wall, rss, out


def measure(root, tools, repeats, log=lambda m: None):
    """A first run of every tool, then `repeats` rounds of no-op runs
    (tools interleaved). Returns the figures; exits when the engine's no-op
    did not end satisfied or re-ran anything."""
    first = {name: timed(cmd, root)[0] for name, cmd in tools.items()}
    # The engine's first no-op also settles the cache for the stamps
    # and checkpoints it wrote; measure from then on, like the others.
    noop = {name: [] for name in tools}
    for r in range(repeats):
        for name, cmd in tools.items():
            elapsed, _, out = timed(cmd, root)
            noop[name].append(elapsed)
            if name == "engine" and not satisfied_in(out):
                sys.exit("engine no-op run did not end satisfied:\n" + out[-2000:])
        log("  no-op #%d: %s" % (r + 1, ", ".join("%s %.3fs" % (n, v[-1]) for n, v in noop.items())))
    # Then one more no-op each, under GNU time, for its peak RSS alone.
    rss = {name: timed(cmd, root, peak=True)[1] for name, cmd in tools.items()}
    attempts, stale = ledger_counts(store_of(root))
    med = {name: statistics.median(v) for name, v in noop.items()}
    return {"first_run_s": first, "noop_median_s": med, "noop_all_s": noop, "noop_rss_kb": rss,
            "ratio_engine_over": {name: med["engine"] / med[name] for name in med if name != "engine"},
            # Repeat by repeat (the tools alternate within each): the target's figure.
            "pair_ratio_over": {name: summary([e / o for e, o in zip(noop["engine"], noop[name])])
                                for name in noop if name != "engine"},
            "engine_attempts_after_all_runs": attempts, "engine_completion_stale_events": stale}


def ledger_counts(store):
    """Attempts and `completion_stale` events in the engine's store."""
    con = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    try:
        attempts = con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        stale = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'completion_stale'").fetchone()[0]
    finally:
        con.close()
    return attempts, stale


def run(tasks, files, repeats, engine, dvc=None, tmpdir=None, log=lambda m: None):
    """Build a tree of `tasks` tasks over `files` files, measure every tool
    there, check the engine re-ran nothing, remove the tree."""
    root = tempfile.mkdtemp(prefix="engine-reuse-bench-", dir=tmpdir)
    try:
        layout = make_tree(root, tasks, files)
        write_plan(root, layout)
        write_make(root, layout)
        ninja = shutil.which("ninja") is not None
        if ninja:
            write_ninja(root, layout)
        if dvc:
            write_dvc(root, layout, dvc)
        result = measure(root, tools_for(root, engine, ninja, dvc), repeats, log)
        if result["engine_attempts_after_all_runs"] != tasks or result["engine_completion_stale_events"]:
            sys.exit("the engine's no-op runs re-ran something: %d attempts for %d tasks, %d stale events"
                     % (result["engine_attempts_after_all_runs"], tasks, result["engine_completion_stale_events"]))
        result.update({"tasks": tasks, "files": files, "repeats": repeats})
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)
        drop_store(root)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--dvc", default=None, help="a dvc executable: measure `dvc repro` too")
    ap.add_argument("--out", default=os.path.join(TOP, "target", "bench"))
    a = ap.parse_args()
    engine = a.engine
    if engine is None:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "engine"], cwd=TOP, check=True)
        engine = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "release", "engine")
    result = run(a.tasks, a.files, a.repeats, engine, a.dvc)
    med = result["noop_median_s"]
    print("reuse no-op: %d tasks, %d input files, median of %d" % (a.tasks, a.files, a.repeats))
    for name in med:
        print("  %-7s first %7.3f s   no-op median %7.3f s" % (name, result["first_run_s"][name], med[name]))
    for name, r in result["ratio_engine_over"].items():
        print("  engine / %s no-op: %.2fx" % (name, r))
    print("  attempts after all runs: %d (one per task: nothing re-run); stale events: %d"
          % (result["engine_attempts_after_all_runs"], result["engine_completion_stale_events"]))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "reuse_noop.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    print(path)


if __name__ == "__main__":
    main()
