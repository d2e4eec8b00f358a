#!/usr/bin/env python3
"""Issue 13's benchmark: `engine report` on a goal of TASKS tasks, for three
shapes of DAG (a random DAG with 1-3 dependencies per task, a chain, a
fan-out). Each shape's ledger is made by a real `engine run` of trivial
command tasks (each prints a line to stdout and one to stderr; every tenth
has a validation); then the report is made REPEATS times as HTML and as
JSON. Figures: median wall time, peak RSS of the report process (from
wait4's rusage), and the size of what it wrote. Target: under 1 s and a
few MB at 1,000 tasks.

usage: bench/report.py [--tasks 1000] [--repeats 7] [--engine PATH] [--out DIR] [--keep DIR]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plan(shape, n, seed=42):
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        if shape == "chain":
            deps = ["t%d" % (i - 1)] if i else []
        elif shape == "fanout":
            deps = ["t0"] if i else []
        else:
            deps = sorted({"t%d" % rng.randrange(i) for _ in range(rng.randint(1, 3))}) if i else []
        t = {"ref": "t%d" % i, "title": "task %d" % i, "provider": "sh", "effect": "none", "depends_on": deps,
             "action": {"run": ["sh", "-c", "echo task %d done; echo note >&2" % i]}}
        if i % 10 == 0:
            t["validations"] = [{"id": "V1", "run": ["true"]}]
        tasks.append(t)
    return {"version": 1,
            "goal": {"id": "bench-%s" % shape, "statement": "a %s of %d tasks" % (shape, n),
                     "acceptance": [{"id": "A1", "statement": "done", "check": {"run": ["true"]}}]},
            "budgets": {"max_provider_calls": 10 * n, "max_attempts_per_task": 3, "deadline_seconds": 36000},
            "providers": {"sh": {"kind": "command"}}, "tasks": tasks}


def timed(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, rusage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("command failed (%d): %s\n%s" % (code, " ".join(cmd), p.stderr.read().decode()[-2000:]))
    return elapsed, rusage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--out", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "bench"))
    ap.add_argument("--keep", default=None, help="copy each shape's report.html here")
    a = ap.parse_args()
    engine = a.engine
    if engine is None:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "engine"], cwd=TOP, check=True)
        engine = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(TOP, "target")), "release", "engine")
    results = {"tasks": a.tasks, "repeats": a.repeats, "shapes": {}}
    print("engine report, %d tasks, median of %d" % (a.tasks, a.repeats))
    print("%-8s %10s %10s %10s %10s %10s %10s" % ("shape", "html s", "html MB", "html RSS", "json s", "json MB", "json RSS"))
    for shape in ["random", "chain", "fanout"]:
        with tempfile.TemporaryDirectory(prefix="engine-report-bench-") as ws:
            with open(os.path.join(ws, "plan.json"), "w") as f:
                json.dump(plan(shape, a.tasks), f)
            p = subprocess.run([engine, "run", "plan.json", "--jobs", "2"], cwd=ws, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("engine run failed (%d):\n%s%s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
            html, json_ = [], []
            for _ in range(a.repeats):
                html.append(timed([engine, "report", "--html", "report.html", "--no-timestamp"], ws))
                json_.append(timed(["sh", "-c", 'exec "$0" report --json --no-timestamp > report.json', engine], ws))
            row = {
                "html_seconds": statistics.median(t for t, _ in html),
                "html_bytes": os.path.getsize(os.path.join(ws, "report.html")),
                "html_peak_rss_mib": max(r for _, r in html),
                "json_seconds": statistics.median(t for t, _ in json_),
                "json_bytes": os.path.getsize(os.path.join(ws, "report.json")),
                "json_peak_rss_mib": max(r for _, r in json_),
            }
            results["shapes"][shape] = row
            print("%-8s %10.3f %10.2f %9.0fM %10.3f %10.2f %9.0fM" % (
                shape, row["html_seconds"], row["html_bytes"] / 1e6, row["html_peak_rss_mib"],
                row["json_seconds"], row["json_bytes"] / 1e6, row["json_peak_rss_mib"]))
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                os.replace(os.path.join(ws, "report.html"), os.path.join(a.keep, "report-%s-%d.html" % (shape, a.tasks)))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "report-latest.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
