#!/usr/bin/env python3
"""The engine side by side with DBOS Transact, LangGraph, ninja, GNU make
(and DVC) in one run: issue 16's benchmark. Normally started by
`bench/run`, which builds the release engine and installs the other tools
first; Python 3 standard library only (the DBOS and LangGraph programs run
in bench/.venv's Python).

Workloads (method and figures in bench/README.md):

  (a) durable step   a chain of N steps that do nothing: engine builtin noop
                     tasks, DBOS @DBOS.step calls, LangGraph nodes with
                     SqliteSaver; per step = (wall at N+1 - wall at 1) / N
  (b) disk floor     write + fsync, and a one-row SQLite WAL+FULL commit
  (c) process DAG    N tasks that exec `true` once, chain and fan-out: the
                     engine (default sandbox and "sandbox": "none"), bare
                     spawn loop, make, ninja (`command = true`: one exec)
  (d) no-op re-run   1,000 tasks x 10 inputs unchanged: engine, make, ninja
                     (and `dvc repro` of 100 stages)
  (e) scale          `engine check` of 100,000 tasks beside `ninja -n`;
                     `engine run` of 100,000 tasks and its no-op re-run
  (f) growth         a fan-out of builtin noop tasks checked and run at
                     10,000, 100,000 and 1,000,000 tasks (--growth-sizes)

Writes the figures as JSON and a Markdown table (bench/results.json and
bench/results.md; with --quick, bench/results-quick.*), and prints the table.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile

import dag
import durable
import reuse_noop
import scale
import tables
from common import Failed, loadavg, log, sh, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_WORKLOADS = ("durable", "floor", "dag", "noop", "scale", "growth")


# ---------------------------------------------------------------- the tools

def venv_env(args):
    """What bench/.venv holds: its Python, the versions of the compared
    packages, and why a package is missing."""
    env = {"venv": args.venv, "python": None, "versions": {}, "missing": {}}
    py = os.path.join(args.venv, "bin", "python")
    why_venv = read_note(os.path.join(args.venv, ".install-failed")) or f"no virtual environment at {args.venv}"
    if not os.access(py, os.X_OK):
        for name in ("dbos", "langgraph"):
            env["missing"][name] = why_venv
        return env
    env["python"] = py
    probe = ("import importlib.metadata as m, json\n"
             "out = {}\n"
             "for p in ('dbos', 'langgraph', 'langgraph-checkpoint-sqlite', 'langgraph-checkpoint', "
             "'SQLAlchemy', 'dvc'):\n"
             "    try: out[p] = m.version(p)\n"
             "    except m.PackageNotFoundError: pass\n"
             "print(json.dumps(out))")
    try:
        env["versions"] = json.loads(sh([py, "-c", probe]) or "{}")
    except ValueError:
        pass
    env["python_version"] = sh([py, "-c", "import platform; print(platform.python_version())"])
    for name, needs in (("dbos", ("dbos",)), ("langgraph", ("langgraph", "langgraph-checkpoint-sqlite"))):
        absent = [p for p in needs if p not in env["versions"]]
        if absent:
            why = read_note(os.path.join(args.venv, ".install-failed")) or "bench/run installs it unless --no-install"
            env["missing"][name] = f"not installed in {args.venv}: {', '.join(absent)} ({why})"
    return env


def read_note(path):
    try:
        with open(path, errors="replace") as f:
            return " ".join(f.read().split())[-600:] or None
    except OSError:
        return None


def dvc_tool(args, env):
    """(path of dvc, None) or (None, why it is not measured)."""
    if "noop" not in args.workloads:
        return None, None
    path = os.path.join(args.venv, "bin", "dvc")
    if not os.access(path, os.X_OK):
        why = read_note(os.path.join(args.venv, ".dvc-install-failed"))
        return None, f"dvc did not install: {why}" if why else f"dvc is not installed in {args.venv}"
    if args.quick and not args.dvc:
        return None, "skipped with --quick (its first `dvc repro` of 100 stages takes about 2 minutes here)"
    return path, None


# ---------------------------------------------------------------- context

def machine(args, env):
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
    # Without optional locks: a plain `git status` rewrites the index, which
    # the engine's build script watches (the next build would compile it).
    dirty = bool(sh(["git", "--no-optional-locks", "status", "--porcelain", "--", "engine", "providers", "Cargo.lock"], cwd=args.repo)) \
        if args.repo else None
    return {
        "cpu_model": lscpu.get("Model name", platform.processor()),
        "cpus": os.cpu_count(),
        "hypervisor": lscpu.get("Hypervisor vendor", ""),
        "mem_total_mib": mem_kb // 1024,
        "kernel": platform.release(),
        "tmpdir": tmp,
        "tmpdir_fs": sh(["findmnt", "-n", "-o", "FSTYPE", "-T", tmp]) or sh(["stat", "-f", "-c", "%T", tmp]),
        "loadavg_at_start": loadavg(),
        "python": platform.python_version(),
        "venv_python": env.get("python_version"),
        "engine": args.engine,
        "engine_commit": commit,
        "engine_tree_dirty": dirty,
        "tools": {
            "make": first_line(sh(["make", "--version"])),
            "ninja": sh(["ninja", "--version"]) if shutil.which("ninja") else None,
            **env["versions"],
        },
    }


def first_line(text):
    return text.splitlines()[0] if text else None


# ---------------------------------------------------------------- workloads

def run_workloads(args, env, res):
    plans_dir = tempfile.mkdtemp(prefix="engine-bench-plans-", dir=args.tmpdir)
    try:
        if "durable" in args.workloads:
            log(f"(a) durable step: N = {args.step_sizes}")
            res["durable"] = durable.bench_durable(args, env, res["builtin"]["supported"])
        if "floor" in args.workloads:
            log("(b) the disk's floor")
            res["floor"] = durable.bench_floor(args)
        if "dag" in args.workloads:
            res["dag"] = []
            for n in args.dag_sizes:
                repeats = args.repeats or (3 if args.quick else (5 if n <= 1000 else 3))
                for shape in ("chain", "fanout"):
                    log(f"(c) process DAG: {shape}, N={n}, {repeats} repeats")
                    res["dag"].append(dag.bench_dag(args, shape, n, repeats, plans_dir))
        if "noop" in args.workloads:
            res["noop"] = bench_noop(args, env)
        if "scale" in args.workloads:
            res["scale"] = bench_scale(args, res, plans_dir)
        if "growth" in args.workloads:
            res["growth"] = []
            for n in args.growth_sizes:
                log(f"(f) growth: builtin fan-out of {n:,} tasks, checked and run")
                if not res["builtin"]["supported"]:
                    res["growth"].append({"n": n, "skipped": durable.BUILTIN_MISSING})
                    continue
                res["growth"].append(scale.bench_growth(args, n, plans_dir))
    finally:
        shutil.rmtree(plans_dir, ignore_errors=True)


def bench_noop(args, env):
    repeats = args.repeats or (3 if args.quick else 7)
    out = {}
    log(f"(d) no-op re-run: 1,000 tasks x 10 inputs, {repeats} repeats")
    out["main"] = noop_figures(reuse_noop.run(1000, 10000, repeats, args.engine, None, args.tmpdir, log))
    dvc, why = dvc_tool(args, env)
    if dvc:
        log(f"(d) no-op re-run with dvc: 100 stages x 10 inputs, {repeats} repeats (first dvc repro is slow)")
        out["dvc"] = noop_figures(reuse_noop.run(100, 1000, repeats, args.engine, dvc, args.tmpdir, log))
    else:
        out["dvc"] = {"skipped": why}
    if not shutil.which("ninja"):
        out["ninja_missing"] = "ninja is not installed"
    return out


def noop_figures(r):
    r["noop_s"] = {name: summary(v) for name, v in r.pop("noop_all_s").items()}
    return r


def bench_scale(args, res, plans_dir):
    n = args.scale_size
    out = {"check": [], "run": None}
    check_repeats = args.check_repeats or (1 if args.quick else 5)
    for shape in ("chain", "dag"):
        log(f"(e) scale: engine check, {shape}, N={n}, {check_repeats} repeats")
        out["check"].append(scale.bench_check(args, shape, n, check_repeats, plans_dir))
    rerun_repeats = 1 if args.quick else 3
    if not args.scale_run:
        out["run"] = {"skipped": "--no-scale-run"}
        return out
    if res["builtin"]["supported"]:
        provider, note = "builtin", None
    elif args.quick:
        out["run"] = {"skipped": durable.BUILTIN_MISSING + " (without it the first run spawns a process per "
                                                           "task, which --quick does not wait for)"}
        return out
    else:
        provider = "command"
        note = durable.BUILTIN_MISSING + ": measured with command `true` tasks (the first run spawns a " \
                                         "process per task; the no-op re-run spawns none, so its figures hold)"
    log(f"(e) scale: engine run of {n} {provider} tasks, then {rerun_repeats} no-op re-runs")
    out["run"] = scale.bench_run(args, n, rerun_repeats, provider, plans_dir)
    out["run"]["note"] = note
    return out


# ---------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, help="the engine binary")
    ap.add_argument("--venv", default=os.path.join(HERE, ".venv"), help="the venv with dbos, langgraph (and dvc)")
    ap.add_argument("--repo", help="the repository (for the commit in the results)")
    ap.add_argument("--out", help="the JSON file to write (default bench/results.json; "
                                  "with --quick bench/results-quick.json); the Markdown goes beside it as .md")
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: N = 1,000 only, 3 repeats, no dvc, one check of each 100,000-task plan")
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                    help="comma-separated subset of " + ",".join(ALL_WORKLOADS))
    ap.add_argument("--step-sizes", type=ints, help="N of the durable-step chains (default 1000,10000; --quick 1000)")
    ap.add_argument("--durable-systems", type=lambda s: s.split(","),
                    help="engine,engine-flushed,engine-command,dbos,langgraph,langgraph-loop,langgraph-async "
                         "(default all but langgraph-async)")
    ap.add_argument("--system-seconds", type=float, default=300.0,
                    help="a durable-step system stops repeating at an N once its runs there took this long "
                         "(default 300; at least one repeat)")
    ap.add_argument("--step-commits", type=int, default=1,
                    help="fsync'd commits one engine step needs (the floor = this x one SQLite commit); default 1: "
                         "in a chain a step's receipt shares its commit with the next step's intent (group commit)")
    ap.add_argument("--dag-sizes", type=ints, default=[1000], help="N of the process DAGs (default 1000)")
    ap.add_argument("--scale-size", type=int, default=100_000, help="tasks of the scale plans (default 100,000)")
    ap.add_argument("--scale-run", action=argparse.BooleanOptionalAction, default=True,
                    help="with scale: also run the 100,000-task plan and its no-op re-runs (default yes; "
                         "--no-scale-run: the checks beside `ninja -n` only)")
    ap.add_argument("--growth-sizes", type=ints, default=[10_000, 100_000, 1_000_000],
                    help="tasks of the growth fan-outs (default 10000,100000,1000000)")
    ap.add_argument("--repeats", type=int, help="repeats of every timed figure (default 5 at N <= 1,000 and 3 above; "
                                                "7 no-op re-runs; --quick 3)")
    ap.add_argument("--check-repeats", type=int, help="repeats of each 100,000-task check (default 5; --quick 1)")
    ap.add_argument("--jobs", type=int, default=2, help="--jobs of the engine and of the fan-outs (default 2)")
    ap.add_argument("--dvc", action="store_true", help="measure dvc even with --quick")
    ap.add_argument("--tmpdir", default=None, help="where the workspaces and databases go (default: the system's)")
    args = ap.parse_args()
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(args.workloads) - set(ALL_WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    args.step_sizes = args.step_sizes or ([1000] if args.quick else [1000, 10000])
    args.durable_systems = args.durable_systems or ["engine", "engine-flushed", "engine-command", "dbos", "langgraph",
                                                    "langgraph-loop"]
    stem = "results-quick" if args.quick else "results"
    args.out = args.out or os.path.join(HERE, stem + ".json")
    return args


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main():
    args = parse_args()
    if not os.access(args.engine, os.X_OK):
        sys.exit(f"no engine binary at {args.engine}")
    for tool in ("make", "/usr/bin/time"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (bench/run installs it: apt-get install make time)")
    env = venv_env(args)
    supported, said = durable.builtin_support(args.engine, args.tmpdir)
    log("builtin provider: " + ("accepted by the engine" if supported else f"{durable.BUILTIN_MISSING}: {said}"))
    res = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": os.environ.get("BENCH_COMMAND") or " ".join(["bench/bench.py"] + sys.argv[1:]),
        "args": {k: v for k, v in vars(args).items() if k not in ("engine", "repo", "venv")},
        "machine": machine(args, env),
        "builtin": {"supported": supported, "why": None if supported else durable.BUILTIN_MISSING,
                    "check_said": said},
        "missing": env["missing"],
    }
    try:
        run_workloads(args, env, res)
    except (Failed, SystemExit) as e:
        res["failed"] = str(e)
        log(f"FAILED: {e}")
    res["loadavg_at_end"] = loadavg()
    md = tables.markdown(res)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    md_path = os.path.splitext(args.out)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    log(f"figures: {args.out} and {md_path}")
    if res.get("failed"):
        sys.exit(1)


if __name__ == "__main__":
    main()
