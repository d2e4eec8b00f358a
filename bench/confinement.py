#!/usr/bin/env python3
"""What confinement costs a run of many short processes (issue 24).

Runs one plan of N independent `true` tasks (effect `none`, `--jobs 2`),
fresh store each time, under three machines the engine can find itself on,
interleaved, R times each, and prints the median wall time and CPU time
(the engine and every process it started: user + system):

  confined      as root: Landlock, the run's namespaces (setns), a cgroup
                per process
  no_landlock   ENGINE_SANDBOX=unavailable: no Landlock, no namespaces
                (a cgroup per process still)
  unprivileged  as nobody (setpriv): Landlock only; no namespace, no cgroup

Python 3 standard library; needs root (for the first and the third).

  bench/confinement.py --engine target/release/engine [--tasks 200] [--repeats 5]
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def plan(n):
    return {
        "version": 1,
        "goal": {"id": "confinement", "statement": "many short processes"},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": f"T{i}", "provider": "sh", "effect": "none", "action": {"run": ["true"]}} for i in range(n)],
    }


def run_once(engine, n, mode):
    root = tempfile.mkdtemp(prefix="bench-confinement-")
    try:
        ws, state = os.path.join(root, "ws"), os.path.join(root, "state")
        os.mkdir(ws)
        os.mkdir(state)
        with open(os.path.join(ws, "plan.json"), "w") as f:
            json.dump(plan(n), f)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": state, "XDG_STATE_HOME": state}
        argv = [engine, "run", "plan.json", "--jobs", "2", "--progress", "none"]
        if mode == "no_landlock":
            env["ENGINE_SANDBOX"] = "unavailable"
        if mode == "unprivileged":
            for p in (root, ws, state, os.path.join(ws, "plan.json")):
                os.chown(p, 65534, 65534)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + argv
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        done = subprocess.run(argv, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{mode}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", required=True)
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    modes = ["confined", "no_landlock", "unprivileged"]
    got = {m: [] for m in modes}
    for _ in range(a.repeats):
        for m in modes:
            got[m].append(run_once(os.path.abspath(a.engine), a.tasks, m))
    print(f"{a.tasks} tasks of `true`, --jobs 2, {a.repeats} runs each; load average {os.getloadavg()[0]:.2f}")
    print("| machine | wall (median) | CPU (median) | CPU per task |")
    print("| --- | --- | --- | --- |")
    for m in modes:
        wall = statistics.median(w for w, _ in got[m])
        cpu = statistics.median(c for _, c in got[m])
        print(f"| {m} | {wall:.2f} s | {cpu:.2f} s | {cpu / a.tasks * 1000:.2f} ms |")


if __name__ == "__main__":
    main()
