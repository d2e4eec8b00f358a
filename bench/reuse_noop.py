#!/usr/bin/env python3
"""Issue 5's benchmark: re-running an unchanged plan of TASKS tasks that
declare FILES input files in all, against GNU make's and ninja's no-op
rebuild of the same files, measured in the same session.

For each tool: a first (cold) build, then REPEATS no-op runs; the figure is
the median no-op wall time. The engine's no-op run makes the reuse decision
for every task (checkpoint observed through the file-state cache: stat
only when nothing changed) and dispatches nothing.

usage: bench/reuse_noop.py [--tasks 1000] [--files 10000] [--repeats 7] [--engine PATH] [--out DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))
    return elapsed, p.stdout


def make_tree(root, tasks, files):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--out", default=os.path.join(TOP, "target", "bench"))
    a = ap.parse_args()
    engine = a.engine
    if engine is None:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "engine"], cwd=TOP, check=True)
        engine = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "release", "engine")
    root = tempfile.mkdtemp(prefix="engine-reuse-bench-")
    try:
        layout = make_tree(root, a.tasks, a.files)
        write_plan(root, layout)
        write_make(root, layout)
        tools = {"engine": [engine, "run", "plan.json", "--jobs", "2"], "make": ["make", "-s", "-r", "-j2"]}
        if shutil.which("ninja"):
            write_ninja(root, layout)
            tools["ninja"] = ["ninja", "-j2"]
        first = {name: timed(cmd, root)[0] for name, cmd in tools.items()}
        # The engine's first no-op also settles the cache for the stamps
        # and checkpoints it wrote; measure from then on, like the others.
        noop = {name: [] for name in tools}
        for _ in range(a.repeats):
            for name, cmd in tools.items():
                elapsed, out = timed(cmd, root)
                noop[name].append(elapsed)
                if name == "engine" and "goal satisfied" not in out:
                    sys.exit("engine no-op run did not end satisfied:\n" + out[-2000:])
        # Nothing was dispatched in the no-op runs: one attempt per task.
        db = os.path.join(root, ".engine", "engine.db")
        import sqlite3
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        attempts = con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        stale = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'completion_stale'").fetchone()[0]
        con.close()
        med = {name: statistics.median(v) for name, v in noop.items()}
        result = {
            "tasks": a.tasks, "files": a.files, "repeats": a.repeats,
            "first_run_s": first, "noop_median_s": med,
            "noop_all_s": noop,
            "ratio_engine_over": {name: med["engine"] / med[name] for name in med if name != "engine"},
            "engine_attempts_after_all_runs": attempts, "engine_completion_stale_events": stale,
        }
        print("reuse no-op: %d tasks, %d input files, median of %d" % (a.tasks, a.files, a.repeats))
        for name in tools:
            print("  %-7s first %7.3f s   no-op median %7.3f s" % (name, first[name], med[name]))
        for name, r in result["ratio_engine_over"].items():
            print("  engine / %s no-op: %.2fx" % (name, r))
        print("  attempts after all runs: %d (one per task: nothing re-run); stale events: %d" % (attempts, stale))
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, "reuse_noop.json")
        with open(path, "w") as fh:
            json.dump(result, fh, indent=1)
        print(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
