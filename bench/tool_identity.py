#!/usr/bin/env python3
"""The cost of the tool's identity in the checkpoint (issue 43,
`TOOL_CHANGED`): on a no-op re-run every command task's checkpoint carries
its resolved executable's digest and an interpreter's script by digest,
read through the file-state cache (size, mtime, ctime, inode): a file that
did not change is stat'ed, not hashed again.

TASKS independent command tasks, measured on their no-op re-run (nothing
runs again; checked from the store):

- `sh -c :`           the executable only (one file, `sh`, for every task);
- `sh tools/tK.sh`    plus one script file per task, unchanged: TASKS cache
                      hits (a stat each);
- scripts touched     the same scripts with a new mtime and the same bytes:
                      TASKS cache misses (each script read and hashed
                      again), and still every task kept (same digests).

The figure is the median of REPEATS no-op runs of each; the difference
between the first two is what the script identity costs a task when nothing
changed, the third what a cache miss costs.

usage: bench/tool_identity.py [--tasks 1000] [--repeats 5] [--engine PATH] [--out DIR]
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

from common import drop_store, engine_run, store_of

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_plan(root, tasks, scripts):
    past = time.time() - 3600  # settled files: outside the cache's racy window
    os.makedirs(os.path.join(root, "tools"), exist_ok=True)
    ts = []
    for k in range(tasks):
        if scripts:
            path = os.path.join(root, "tools", "t%04d.sh" % k)
            with open(path, "w") as fh:
                fh.write(": task %d\n" % k)
            os.utime(path, (past, past))
            argv = ["sh", "tools/t%04d.sh" % k]
        else:
            argv = ["sh", "-c", ": task %d" % k]
        ts.append({"ref": "T%04d" % k, "provider": "sh", "effect": "local", "action": {"run": argv}})
    plan = {"version": 1, "goal": {"id": "tool-identity-bench", "statement": "independent tasks"},
            "budgets": {"max_provider_calls": 10 ** 9, "max_attempts_per_task": 10},
            "providers": {"sh": {"kind": "command", "sandbox": "none"}}, "tasks": ts}
    with open(os.path.join(root, "plan.json"), "w") as fh:
        json.dump(plan, fh)


def attempts(store):
    con = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
    finally:
        con.close()


def hashed_since(store, t_ns):
    """Script files the file-state cache hashed since t_ns (its misses)."""
    con = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM file_cache WHERE path LIKE '%/tools/t%' AND hashed_at_ns >= ?",
                           (t_ns,)).fetchone()[0]
    finally:
        con.close()


def noop(root, engine, tasks, repeats, touch=False):
    walls, cpus, hashed = [], [], []
    for _ in range(repeats):
        if touch:
            now = time.time() - 3 + len(walls)  # a new mtime, outside the racy window's future
            for k in range(tasks):
                os.utime(os.path.join(root, "tools", "t%04d.sh" % k), (now - 10, now - 10))
        before = attempts(store_of(root))
        t_ns = time.time_ns()
        wall, cpu = engine_run(root, engine)
        hashed.append(hashed_since(store_of(root), t_ns))
        if attempts(store_of(root)) != before:
            sys.exit("a no-op re-run ran a task again (%s)" % root)
        walls.append(wall)
        cpus.append(cpu)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "walls": walls,
            "scripts_hashed": hashed}


def run(tasks, engine, repeats, tmpdir=None):
    out = {"tasks": tasks, "repeats": repeats}
    for name, scripts in (("sh_c", False), ("scripts", True)):
        root = tempfile.mkdtemp(prefix="engine-tool-bench-", dir=tmpdir)
        try:
            write_plan(root, tasks, scripts)
            engine_run(root, engine)
            time.sleep(3)  # the scripts' ctime outside the cache's racy window
            out[name] = noop(root, engine, tasks, repeats)
            if scripts:
                out["scripts_touched"] = noop(root, engine, tasks, repeats, touch=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
            drop_store(root)
    per = lambda a, b: (out[a]["cpu_s"] - out[b]["cpu_s"]) * 1e6 / tasks
    out["script_hit_cpu_us_per_task"] = per("scripts", "sh_c")
    out["script_miss_cpu_us_per_task"] = per("scripts_touched", "scripts")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--out", default=os.path.join(TOP, "target", "bench"))
    a = ap.parse_args()
    engine = a.engine
    if engine is None:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "engine"], cwd=TOP, check=True)
        engine = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "release", "engine")
    r = run(a.tasks, engine, a.repeats)
    for name in ("sh_c", "scripts", "scripts_touched"):
        print("%-16s no-op re-run of %d tasks: median %.3f s wall, %.3f s CPU  (walls %s; scripts hashed %s)"
              % (name, a.tasks, r[name]["wall_s"], r[name]["cpu_s"], ", ".join("%.3f" % w for w in r[name]["walls"]),
                 r[name]["scripts_hashed"]))
    print("script identity, unchanged (cache hit): %+.1f us CPU a task; touched (miss, hashed): %+.1f us a task"
          % (r["script_hit_cpu_us_per_task"], r["script_miss_cpu_us_per_task"]))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "tool_identity.json")
    with open(path, "w") as fh:
        json.dump(r, fh, indent=1)
    print(path)


if __name__ == "__main__":
    main()
