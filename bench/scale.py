"""Workload (e), scale: `engine check` of 100,000-task plans beside
`ninja -n` of the same DAG, and an `engine run` of a 100,000-task plan
followed by its no-op re-run (every task reused, nothing dispatched); wall
time and peak RSS of each. Workload (f), growth: a fan-out of `builtin`
noop tasks checked and run at 10,000, 100,000 and 1,000,000 tasks."""

import os
import shutil

from common import Failed, Scratch, log, run_ok, summary, tail, store_of, satisfied_in, unlimited_stack
from plans import write_ninja, write_plan
from reuse_noop import ledger_counts


def bench_check(args, shape, n, repeats, plans_dir):
    """`engine check` of the plan, alternating with `ninja -n` (a dry run:
    loads build.ninja, decides what to run, runs nothing) of the same DAG."""
    src = os.path.join(plans_dir, f"check-{shape}-{n}.json")
    write_plan(src, shape, n, "command")
    ninja = shutil.which("ninja")
    nsrc = os.path.join(plans_dir, f"check-{shape}-{n}.ninja")
    if ninja:
        write_ninja(nsrc, shape, n)
    rec = {"shape": shape, "n": n, "repeats": repeats, "plan_bytes": os.path.getsize(src),
           "wall_s": [], "rss_kb": [], "cpu_s": []}
    nin = {"wall_s": [], "rss_kb": [], "cpu_s": []}
    for r in range(repeats):
        with Scratch(args.tmpdir) as ws:
            shutil.copy(src, os.path.join(ws, "plan.json"))
            wall, rss, cpu = run_ok([args.engine, "check", "plan.json"], ws, os.path.join(ws, "out"),
                                    f"engine check {shape} N={n}", preexec=unlimited_stack)
            if set(os.listdir(ws)) != {"plan.json", "out"}:
                raise Failed(f"engine check wrote into the workspace: {sorted(os.listdir(ws))}")
        for key, v in (("wall_s", wall), ("rss_kb", rss), ("cpu_s", cpu)):
            rec[key].append(v)
        line = f"  check {shape:5} N={n}: #{r + 1}: {wall:6.2f}s (CPU {cpu:5.2f}s)  {rss / 1024:7.1f} MiB"
        if ninja:
            with Scratch(args.tmpdir) as ws:
                shutil.copy(nsrc, os.path.join(ws, "build.ninja"))
                nwall, nrss, ncpu = run_ok([ninja, "-n", "-j", "1", "--quiet"], ws, os.path.join(ws, "out"),
                                           f"ninja -n {shape} N={n}", preexec=unlimited_stack)
            for key, v in (("wall_s", nwall), ("rss_kb", nrss), ("cpu_s", ncpu)):
                nin[key].append(v)
            line += f"; ninja -n {nwall:6.2f}s  {nrss / 1024:7.1f} MiB"
        log(line)
    if ninja:
        rec["ninja_bytes"] = os.path.getsize(nsrc)
        rec["pair_ratio_wall"] = summary([a / b for a, b in zip(rec["wall_s"], nin["wall_s"])])
        rec["ninja"] = {key: summary(v) for key, v in nin.items()}
    for key in ("wall_s", "rss_kb", "cpu_s"):
        rec[key] = summary(rec[key])
    return rec


def bench_growth(args, n, plans_dir):
    """`engine check`, then a first `engine run`, of a fan-out of n builtin
    noop tasks (one root, n-1 leaves), each once, in a fresh folder."""
    src = os.path.join(plans_dir, f"growth-{n}.json")
    write_plan(src, "fanout", n, "builtin")
    rec = {"n": n, "plan_bytes": os.path.getsize(src), "jobs": args.jobs}
    with Scratch(args.tmpdir) as ws:
        shutil.copy(src, os.path.join(ws, "plan.json"))
        out = os.path.join(ws, "out")
        wall, rss, cpu = run_ok([args.engine, "check", "plan.json"], ws, out, f"engine check of {n} builtin tasks")
        rec["check"] = {"wall_s": wall, "rss_kb": rss, "cpu_s": cpu}
        log(f"  growth N={n}: check {wall:7.2f}s, {rss / 1024:7.1f} MiB")
        argv = [args.engine, "run", "plan.json", "--jobs", str(args.jobs), "--store", store_of(ws)]
        wall, rss, cpu = run_ok(argv, ws, out, f"engine run of {n} builtin tasks")
        said = 0
        with open(out, errors="replace") as f:
            for line in f:
                said += "succeeded" in line
        if said < n:
            raise Failed(f"run of {n} builtin tasks: only {said} task lines say succeeded:\n{tail(out)}")
        rec["run"] = {"wall_s": wall, "rss_kb": rss, "cpu_s": cpu}
        log(f"  growth N={n}: run {wall:7.2f}s, {rss / 1024:7.1f} MiB")
    return rec


def bench_run(args, n, repeats, provider, plans_dir):
    """A first `engine run` of a random DAG of n tasks, then `repeats` no-op
    re-runs of the same plan in the same workspace and store."""
    src = os.path.join(plans_dir, f"scale-{provider}-{n}.json")
    write_plan(src, "dag", n, provider)
    rec = {"shape": "dag", "n": n, "provider": provider, "jobs": args.jobs, "repeats": repeats}
    with Scratch(args.tmpdir) as ws:
        shutil.copy(src, os.path.join(ws, "plan.json"))
        argv = [args.engine, "run", "plan.json", "--jobs", str(args.jobs), "--store", store_of(ws)]
        out = os.path.join(ws, "out")
        wall, rss, cpu = run_ok(argv, ws, out, f"engine run of {n} {provider} tasks")
        said = open(out, errors="replace").read().count("succeeded")
        if said < n:
            raise Failed(f"first run of {n} tasks: only {said} task lines say succeeded:\n{tail(out)}")
        rec["first_run"] = {"wall_s": wall, "rss_kb": rss, "cpu_s": cpu}
        log(f"  scale run {provider} N={n}: first run {wall:7.2f}s, {rss / 1024:7.1f} MiB")
        walls, rsss, cpus = [], [], []
        for r in range(repeats):
            wall, rss, cpu = run_ok(argv, ws, out, f"no-op re-run of {n} {provider} tasks")
            text = open(out, errors="replace").read()
            if not satisfied_in(text):
                raise Failed(f"no-op re-run of {n} tasks did not end satisfied:\n{tail(out)}")
            walls.append(wall)
            rsss.append(rss)
            cpus.append(cpu)
            log(f"  scale no-op re-run N={n} #{r + 1}: {wall:7.2f}s, {rss / 1024:7.1f} MiB")
        attempts, _ = ledger_counts(store_of(ws))
        if attempts != n:
            raise Failed(f"the no-op re-runs of {n} tasks dispatched again: {attempts} attempts")
        rec["noop_rerun"] = {"wall_s": summary(walls), "rss_kb": summary(rsss), "cpu_s": summary(cpus)}
    return rec
