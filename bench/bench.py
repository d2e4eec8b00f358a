#!/usr/bin/env python3
"""Benchmark of `engine run` and `engine check` (issue 2, "Performance").

Normally started by `bench/run`, which builds the release binary first.
Python 3 standard library only.

What it measures (see bench/README.md for the method and the figures):

* `engine run` on plans of N trivial tasks (`{"run": ["true"]}`, effect
  `none`, one `command` provider, no validations, no acceptance checks), as a
  chain (t0 <- t1 <- ... ) and as a fan-out (one root t0, N-1 leaves that
  each depend on t0), each run in a fresh temporary workspace.
* the bare cost of spawning `true` N times from this (Python) process with
  `os.posix_spawnp` + `os.waitpid`, with the same dependency shape: the chain
  one at a time, the fan-out the root first and then the leaves with `--jobs`
  children in flight (the same parallelism the engine gets);
* GNU make on the same DAG (phony targets whose recipe is `true`), `-j1` for
  the chain and `-j<jobs>` for the fan-out;
* `engine check` of a 100,000-task plan (a chain and a random DAG).

Per-task overhead of the engine = (engine wall - bare spawn wall) / N,
paired within each repeat, median over repeats. Peak RSS comes from
`wait4()`'s rusage of the child (what `/usr/bin/time` reports as "Maximum
resident set size").
"""

import argparse
import datetime
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_OVERHEAD_MS = 1.0
TARGET_CHECK_S = 1.0
TARGET_CHECK_MB = 500.0


# ---------------------------------------------------------------- plans

def task(ref, deps):
    return {
        "ref": ref,
        "provider": "sh",
        "action": {"run": ["true"]},
        "effect": "none",
        "depends_on": deps,
    }


def plan_doc(tasks):
    n = len(tasks)
    return {
        "version": 1,
        "goal": {"id": "bench", "statement": f"{n} trivial tasks"},
        # Budgets high enough never to stop the run.
        "budgets": {
            "max_attempts_per_task": 3,
            "max_revisions": 3,
            "max_provider_calls": 10 * n + 10,
            "max_cost": 0,
            "deadline_seconds": 86400,
        },
        "providers": {"sh": {"kind": "command"}},
        "tasks": tasks,
    }


def deps_of(shape, n, seed=42):
    """Dependency lists by task index for a shape."""
    if shape == "chain":
        return [[] if i == 0 else [i - 1] for i in range(n)]
    if shape == "fanout":
        return [[] if i == 0 else [0] for i in range(n)]
    if shape == "dag":
        # Each task after the first depends on 1-3 distinct earlier tasks.
        rnd = random.Random(seed)
        out = [[]]
        for i in range(1, n):
            k = min(i, rnd.randint(1, 3))
            out.append(sorted(rnd.sample(range(i), k)))
        return out
    raise ValueError(shape)


def write_plan(path, shape, n, seed=42):
    deps = deps_of(shape, n, seed)
    tasks = [task(f"t{i}", [f"t{d}" for d in ds]) for i, ds in enumerate(deps)]
    if shape == "dag":
        # File order is not dependency order: make the engine sort it.
        random.Random(seed + 1).shuffle(tasks)
    with open(path, "w") as f:
        json.dump(plan_doc(tasks), f, separators=(",", ":"))


def write_makefile(path, shape, n):
    deps = deps_of(shape, n)
    names = [f"t{i}" for i in range(n)]
    with open(path, "w") as f:
        if shape == "chain":
            f.write(f"all: t{n - 1}\n")
        else:
            f.write("all: " + " ".join(names[1:] or names[:1]) + "\n")
        f.write(".PHONY: all " + " ".join(names) + "\n")
        for i, ds in enumerate(deps):
            f.write(f"t{i}:" + "".join(f" t{d}" for d in ds) + "\n\ttrue\n")


# ---------------------------------------------------------------- running

def run_child(argv, cwd, out_path):
    """Run argv to completion; return (wall seconds, exit code, peak RSS KiB,
    CPU seconds). CPU is user + system of the child and of the children it
    waited for (the `true`s), from wait4()."""
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, p.returncode, ru.ru_maxrss, ru.ru_utime + ru.ru_stime


def cpu_now():
    """CPU seconds used so far by this process and its waited-for children."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


def tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return ""


def bare_spawn(shape, n, jobs):
    """Spawn `true` n times in the DAG's shape; return (wall, CPU) seconds.
    CPU counts this process (the spawning loop) and the `true`s."""
    env = dict(os.environ)
    c0 = cpu_now()
    t0 = time.perf_counter()
    if shape == "chain" or jobs <= 1:
        for _ in range(n):
            pid = os.posix_spawnp("true", ["true"], env)
            _, st = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(st) == 0
    else:
        # Root first, then the leaves with `jobs` in flight.
        pid = os.posix_spawnp("true", ["true"], env)
        os.waitpid(pid, 0)
        running = set()
        left = n - 1
        while left or running:
            while left and len(running) < jobs:
                running.add(os.posix_spawnp("true", ["true"], env))
                left -= 1
            pid, st = os.waitpid(-1, 0)
            assert os.waitstatus_to_exitcode(st) == 0
            running.discard(pid)
    return time.perf_counter() - t0, cpu_now() - c0


class Scratch:
    """A fresh temporary folder, removed afterwards."""

    def __init__(self, base):
        self.base = base

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="engine-bench-", dir=self.base)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def med(xs):
    return statistics.median(xs) if xs else None


def bench_run(args, shape, n, repeats, plans_dir):
    plan_src = os.path.join(plans_dir, f"{shape}-{n}.json")
    mk_src = os.path.join(plans_dir, f"{shape}-{n}.mk")
    write_plan(plan_src, shape, n)
    write_makefile(mk_src, shape, n)
    make_jobs = 1 if shape == "chain" else args.jobs
    rec = {
        "shape": shape, "n": n, "jobs": args.jobs, "make_jobs": make_jobs, "repeats": repeats,
        "engine_wall_s": [], "engine_rss_kb": [], "bare_wall_s": [], "make_wall_s": [],
        "make_rss_kb": [], "overhead_ms_per_task": [],
        "engine_cpu_s": [], "bare_cpu_s": [], "cpu_overhead_ms_per_task": [], "loadavg_1min": [],
    }
    for r in range(repeats):
        with Scratch(args.tmpdir) as ws:
            shutil.copy(plan_src, os.path.join(ws, "plan.json"))
            out = os.path.join(ws, "engine.out")
            load = loadavg()
            wall, code, rss, cpu = run_child([args.engine, "run", "plan.json", "--jobs", str(args.jobs)], ws, out)
            if code != 0:
                sys.exit(f"engine run {shape} N={n} exited {code}:\n{tail(out)}")
            if r == 0:
                lines = open(out, errors="replace").read().count("succeeded")
                if lines < n:
                    sys.exit(f"engine run {shape} N={n}: only {lines} task lines say succeeded:\n{tail(out)}")
        bare, bare_cpu = bare_spawn(shape, n, args.jobs)
        with Scratch(args.tmpdir) as ws:
            shutil.copy(mk_src, os.path.join(ws, "Makefile"))
            out = os.path.join(ws, "make.out")
            mwall, mcode, mrss, _ = run_child(["make", "-r", "-R", "-s", f"-j{make_jobs}", "-f", "Makefile"], ws, out)
            if mcode != 0:
                sys.exit(f"make {shape} N={n} exited {mcode}:\n{tail(out)}")
        rec["engine_wall_s"].append(wall)
        rec["engine_rss_kb"].append(rss)
        rec["bare_wall_s"].append(bare)
        rec["make_wall_s"].append(mwall)
        rec["make_rss_kb"].append(mrss)
        rec["overhead_ms_per_task"].append((wall - bare) / n * 1000)
        rec["engine_cpu_s"].append(cpu)
        rec["bare_cpu_s"].append(bare_cpu)
        rec["cpu_overhead_ms_per_task"].append((cpu - bare_cpu) / n * 1000)
        rec["loadavg_1min"].append(load)
        log(f"  {shape:6} N={n:<6} #{r + 1}: engine {wall:8.2f}s ({rss / 1024:6.1f} MiB, CPU {cpu:6.2f}s)  "
            f"bare {bare:6.2f}s (CPU {bare_cpu:5.2f}s)  make {mwall:6.2f}s  -> overhead {(wall - bare) / n * 1000:6.2f} ms/task"
            f"  [load {load}]")
    rec["engine_wall_median_s"] = med(rec["engine_wall_s"])
    rec["bare_wall_median_s"] = med(rec["bare_wall_s"])
    rec["make_wall_median_s"] = med(rec["make_wall_s"])
    rec["overhead_median_ms_per_task"] = med(rec["overhead_ms_per_task"])
    rec["engine_ms_per_task_median"] = rec["engine_wall_median_s"] / n * 1000
    rec["bare_ms_per_task_median"] = rec["bare_wall_median_s"] / n * 1000
    rec["make_ms_per_task_median"] = rec["make_wall_median_s"] / n * 1000
    rec["make_overhead_median_ms_per_task"] = med(
        [(m - b) / n * 1000 for m, b in zip(rec["make_wall_s"], rec["bare_wall_s"])])
    rec["cpu_overhead_median_ms_per_task"] = med(rec["cpu_overhead_ms_per_task"])
    rec["engine_rss_max_kb"] = max(rec["engine_rss_kb"])
    rec["make_rss_max_kb"] = max(rec["make_rss_kb"])
    rec["ratio_engine_make"] = med([e / m for e, m in zip(rec["engine_wall_s"], rec["make_wall_s"])])
    rec["meets_overhead_target"] = rec["overhead_median_ms_per_task"] < TARGET_OVERHEAD_MS
    return rec


def bench_check(args, shape, n, repeats, plans_dir):
    src = os.path.join(plans_dir, f"check-{shape}-{n}.json")
    write_plan(src, shape, n)
    rec = {"shape": shape, "n": n, "repeats": repeats, "plan_bytes": os.path.getsize(src),
           "wall_s": [], "rss_kb": [], "cpu_s": []}
    for r in range(repeats):
        with Scratch(args.tmpdir) as ws:
            shutil.copy(src, os.path.join(ws, "plan.json"))
            out = os.path.join(ws, "check.out")
            wall, code, rss, cpu = run_child([args.engine, "check", "plan.json"], ws, out)
            if code != 0:
                sys.exit(f"engine check {shape} N={n} exited {code}:\n{tail(out)}")
            if os.path.exists(os.path.join(ws, ".engine")):
                sys.exit("engine check wrote a store; it must write nothing")
        rec["wall_s"].append(wall)
        rec["rss_kb"].append(rss)
        rec["cpu_s"].append(cpu)
        log(f"  check {shape:5} N={n}: #{r + 1}: {wall:6.2f}s (CPU {cpu:5.2f}s)  {rss / 1024:7.1f} MiB")
    rec["wall_median_s"] = med(rec["wall_s"])
    rec["cpu_median_s"] = med(rec["cpu_s"])
    rec["rss_median_kb"] = med(rec["rss_kb"])
    rec["rss_max_kb"] = max(rec["rss_kb"])
    rec["meets_time_target"] = rec["wall_median_s"] < TARGET_CHECK_S
    rec["meets_memory_target"] = rec["rss_max_kb"] / 1024 < TARGET_CHECK_MB
    return rec


# ---------------------------------------------------------------- context

def sh(argv, cwd=None):
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(args):
    lscpu = {}
    for line in sh(["lscpu"]).splitlines():
        k, _, v = line.partition(":")
        lscpu[k.strip()] = v.strip()
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    tmp = args.tmpdir or tempfile.gettempdir()
    commit = sh(["git", "rev-parse", "HEAD"], cwd=args.repo) if args.repo else ""
    dirty = bool(sh(["git", "status", "--porcelain", "--", "engine", "providers", "Cargo.lock"], cwd=args.repo)) if args.repo else None
    return {
        "cpu_model": lscpu.get("Model name", platform.processor()),
        "cpus": os.cpu_count(),
        "hypervisor": lscpu.get("Hypervisor vendor", ""),
        "mem_total_mib": mem_kb // 1024,
        "kernel": platform.release(),
        "tmpdir": tmp,
        "tmpdir_fs": sh(["findmnt", "-n", "-o", "FSTYPE", "-T", tmp]) or sh(["stat", "-f", "-c", "%T", tmp]),
        "make": sh(["make", "--version"]).splitlines()[0] if sh(["make", "--version"]) else "",
        "python": platform.python_version(),
        "engine": args.engine,
        "engine_commit": commit,
        "engine_tree_dirty": dirty,
    }


# ---------------------------------------------------------------- report

def table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(f"{h:>{w}}" for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(f"{str(c):>{w}}" for c, w in zip(r, widths)))
    return "\n".join(out)


def report(res):
    m = res["machine"]
    print()
    print(f"machine: {m['cpus']} x {m['cpu_model']} ({m['hypervisor'] or 'bare metal'}), "
          f"{m['mem_total_mib']} MiB, Linux {m['kernel']}, workspaces on {m['tmpdir']} ({m['tmpdir_fs']})")
    loads = [x for r in res["runs"] for x in r["loadavg_1min"] if x is not None]
    if loads:
        print(f"1-min load average as each engine run started: median {med(loads):.2f}, max {max(loads):.2f} "
              f"(the benchmark itself keeps it near 1-2; more means other work shared the {m['cpus']} CPUs)")
    print(f"engine {m['engine_commit'][:12]}{' (+local changes)' if m['engine_tree_dirty'] else ''}; {m['make']}; "
          f"--jobs {res['args']['jobs']}; medians over repeats")
    if res["runs"]:
        rows = []
        for r in res["runs"]:
            rows.append([
                r["shape"], r["n"], r["repeats"],
                f"{r['engine_wall_median_s']:.2f}", f"{r['bare_wall_median_s']:.2f}", f"{r['make_wall_median_s']:.2f}",
                f"{r['engine_ms_per_task_median']:.2f}", f"{r['bare_ms_per_task_median']:.2f}",
                f"{r['overhead_median_ms_per_task']:.2f}", f"{r['cpu_overhead_median_ms_per_task']:.2f}",
                f"{r['make_overhead_median_ms_per_task']:.2f}",
                f"{r['ratio_engine_make']:.1f}x", f"{r['engine_rss_max_kb'] / 1024:.1f}",
                "ok" if r["meets_overhead_target"] else "MISSED",
            ])
        print()
        print("engine run (wall seconds; ms per task; overhead = (wall - bare spawn) / N; "
              "CPU ovh = (engine CPU - bare spawn CPU) / N, `true`s included on both sides)")
        print(table(rows, ["shape", "N", "reps", "engine s", "bare s", "make s", "engine ms/t", "bare ms/t",
                           "overhead ms/t", "CPU ovh ms/t", "make ovh ms/t", "engine/make", "engine RSS MiB",
                           f"< {TARGET_OVERHEAD_MS:g} ms"]))
    if res["check"]:
        rows = []
        for c in res["check"]:
            rows.append([
                c["shape"], c["n"], c["repeats"], f"{c['plan_bytes'] / 1e6:.1f}",
                f"{c['wall_median_s']:.2f}", f"{c['cpu_median_s']:.2f}", f"{c['rss_max_kb'] / 1024:.0f}",
                "ok" if c["meets_time_target"] else "MISSED",
                "ok" if c["meets_memory_target"] else "MISSED",
            ])
        print()
        print("engine check (plan load + validation)")
        print(table(rows, ["shape", "N", "reps", "plan MB", "wall s", "CPU s", "peak RSS MiB",
                           f"< {TARGET_CHECK_S:g} s", f"< {TARGET_CHECK_MB:g} MB"]))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, help="the engine binary")
    ap.add_argument("--out-dir", required=True, help="where the JSON results go")
    ap.add_argument("--repo", help="the repository (for the commit in the results)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: N = 1,000 only, 2 repeats, one check of each 100,000-task plan")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                    help="task counts for `engine run` (default 1000,10000)")
    ap.add_argument("--shapes", default="chain,fanout", help="chain,fanout (default both)")
    ap.add_argument("--repeats", type=int, help="repeats per run size (default 5 at N <= 1000, 3 above)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="--jobs for the engine and the fan-out baselines (default: CPUs, as the engine)")
    ap.add_argument("--check-size", type=int, default=100_000, help="tasks in the `engine check` plans")
    ap.add_argument("--check-repeats", type=int, help="repeats of each check (default 5; 1 with --quick)")
    ap.add_argument("--no-run", action="store_true", help="skip the `engine run` benchmarks")
    ap.add_argument("--no-check", action="store_true", help="skip the `engine check` benchmarks")
    ap.add_argument("--tmpdir", default=None, help="where temporary workspaces go (default: the system's)")
    args = ap.parse_args()

    if not os.access(args.engine, os.X_OK):
        sys.exit(f"no engine binary at {args.engine}")
    if shutil.which("make") is None:
        sys.exit("GNU make is needed for the comparison (apt-get install make)")
    sizes = args.sizes or ([1000] if args.quick else [1000, 10000])
    shapes = [s for s in args.shapes.split(",") if s]
    check_repeats = args.check_repeats or (1 if args.quick else 5)

    res = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "args": {"quick": args.quick, "jobs": args.jobs, "sizes": sizes, "shapes": shapes,
                 "check_size": args.check_size, "check_repeats": check_repeats},
        "targets": {"overhead_ms_per_task": TARGET_OVERHEAD_MS, "check_s": TARGET_CHECK_S,
                    "check_mb": TARGET_CHECK_MB},
        "machine": machine(args),
        "runs": [],
        "check": [],
    }
    plans_dir = tempfile.mkdtemp(prefix="engine-bench-plans-", dir=args.tmpdir)
    try:
        if not args.no_run:
            for n in sizes:
                repeats = args.repeats or (2 if args.quick else (5 if n <= 1000 else 3))
                for shape in shapes:
                    log(f"engine run: {shape}, N={n}, {repeats} repeats")
                    res["runs"].append(bench_run(args, shape, n, repeats, plans_dir))
        if not args.no_check:
            for shape in ("chain", "dag"):
                log(f"engine check: {shape}, N={args.check_size}, {check_repeats} repeats")
                res["check"].append(bench_check(args, shape, args.check_size, check_repeats, plans_dir))
    finally:
        shutil.rmtree(plans_dir, ignore_errors=True)

    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join(args.out_dir, f"results-{stamp}{'-quick' if args.quick else ''}.json")
    for p in (path, os.path.join(args.out_dir, "latest.json")):
        with open(p, "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
    report(res)
    print(f"figures: {path} (and latest.json beside it)")


if __name__ == "__main__":
    main()
