#!/usr/bin/env python3
"""Early cutoff (issue 43): a chain of TASKS tasks, T1 -> T2 -> ... -> Tn,
each a real `sh` process. T1 writes the first line of `in.txt` to its
output; each next task copies its upstream's output to its own; every task
declares its output. After a first run, the second line of `in.txt` is
edited: T1's input changed, so T1 runs again — and writes the same bytes.
With early cutoff the engine runs 1 task and keeps the other TASKS-1
(`completion_kept`, UPSTREAM_OUTPUT_UNCHANGED); the same chain without
declared outputs (no cutoff possible) runs all TASKS again. Both figures
(wall time, attempts added, events) are measured in the same session and
checked from the store afterwards.

usage: bench/cutoff.py [--tasks 1000] [--engine PATH] [--out DIR]
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from common import drop_store, engine_run, store_of

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_plan(root, tasks, outputs):
    chain = []
    for k in range(1, tasks + 1):
        if k == 1:
            script, inputs = "head -n 1 in.txt > out/%05d.txt" % k, ["in.txt"]
        else:
            script, inputs = "cat out/%05d.txt > out/%05d.txt" % (k - 1, k), ["out/%05d.txt" % (k - 1)]
        t = {"ref": "T%05d" % k, "provider": "sh", "effect": "local", "inputs": inputs,
             "action": {"run": ["sh", "-c", script]}}
        # Its write declared either way (the undeclared_write rule): kept
        # (`outputs`, which early cutoff compares) or only allowed.
        t["outputs" if outputs else "may_change"] = ["out/%05d.txt" % k]
        if k > 1:
            t["depends_on"] = ["T%05d" % (k - 1)]
        chain.append(t)
    plan = {"version": 1, "goal": {"id": "cutoff-bench", "statement": "a chain of copies"},
            "budgets": {"max_provider_calls": 10 ** 9, "max_attempts_per_task": 10},
            "providers": {"sh": {"kind": "command"}}, "tasks": chain}
    with open(os.path.join(root, "plan.json"), "w") as fh:
        json.dump(plan, fh)


def counts(store):
    con = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    try:
        q = lambda sql: con.execute(sql).fetchone()[0]
        return {"attempts": q("SELECT COUNT(*) FROM attempts"),
                "completion_kept": q("SELECT COUNT(*) FROM events WHERE kind = 'completion_kept'"),
                "completion_stale": q("SELECT COUNT(*) FROM events WHERE kind = 'completion_stale'")}
    finally:
        con.close()


def one(tasks, engine, outputs, tmpdir=None):
    """First run, then the edit and the measured second run."""
    root = tempfile.mkdtemp(prefix="engine-cutoff-bench-", dir=tmpdir)
    try:
        os.makedirs(os.path.join(root, "out"))
        with open(os.path.join(root, "in.txt"), "w") as fh:
            fh.write("first line\nsecond line\n")
        write_plan(root, tasks, outputs)
        first, _ = engine_run(root, engine)
        before = counts(store_of(root))
        with open(os.path.join(root, "in.txt"), "w") as fh:
            fh.write("first line\nanother second line\n")
        wall, cpu = engine_run(root, engine)
        after = counts(store_of(root))
        return {"first_run_s": first, "rerun_s": wall, "rerun_cpu_s": cpu,
                "tasks_run_again": after["attempts"] - before["attempts"],
                "completion_kept": after["completion_kept"] - before["completion_kept"],
                "completion_stale": after["completion_stale"] - before["completion_stale"]}
    finally:
        shutil.rmtree(root, ignore_errors=True)
        drop_store(root)


def run(tasks, engine, tmpdir=None):
    with_cutoff = one(tasks, engine, True, tmpdir)
    without = one(tasks, engine, False, tmpdir)
    if with_cutoff["tasks_run_again"] != 1 or with_cutoff["completion_kept"] != tasks - 1:
        sys.exit("early cutoff did not hold: %s" % with_cutoff)
    if without["tasks_run_again"] != tasks:
        sys.exit("without outputs every task should run again: %s" % without)
    return {"tasks": tasks, "outputs_declared": with_cutoff, "no_outputs": without}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--out", default=os.path.join(TOP, "target", "bench"))
    a = ap.parse_args()
    engine = a.engine
    if engine is None:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "engine"], cwd=TOP, check=True)
        engine = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "release", "engine")
    result = run(a.tasks, engine)
    for name in ("outputs_declared", "no_outputs"):
        r = result[name]
        print("%-16s first run %7.2f s; after the edit: %5d task(s) run again in %7.2f s (cpu %.2f s), "
              "%d kept by early cutoff, %d stale"
              % (name, r["first_run_s"], r["tasks_run_again"], r["rerun_s"], r["rerun_cpu_s"],
                 r["completion_kept"], r["completion_stale"]))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "cutoff.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    print(path)


if __name__ == "__main__":
    main()
