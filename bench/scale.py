"""Workload (e), scale: `engine check` of 100,000-task plans, and an
`engine run` of a 100,000-task plan followed by its no-op re-run (every task
reused, nothing dispatched); wall time and peak RSS of each."""

import os
import shutil

from common import Failed, Scratch, log, run_ok, summary, tail, store_of, satisfied_in
from plans import write_plan
from reuse_noop import ledger_counts


def bench_check(args, shape, n, repeats, plans_dir):
    src = os.path.join(plans_dir, f"check-{shape}-{n}.json")
    write_plan(src, shape, n, "command")
    rec = {"shape": shape, "n": n, "repeats": repeats, "plan_bytes": os.path.getsize(src),
           "wall_s": [], "rss_kb": [], "cpu_s": []}
    for r in range(repeats):
        with Scratch(args.tmpdir) as ws:
            shutil.copy(src, os.path.join(ws, "plan.json"))
            wall, rss, cpu = run_ok([args.engine, "check", "plan.json"], ws, os.path.join(ws, "out"),
                                    f"engine check {shape} N={n}")
            if set(os.listdir(ws)) != {"plan.json", "out"}:
                raise Failed(f"engine check wrote into the workspace: {sorted(os.listdir(ws))}")
        for key, v in (("wall_s", wall), ("rss_kb", rss), ("cpu_s", cpu)):
            rec[key].append(v)
        log(f"  check {shape:5} N={n}: #{r + 1}: {wall:6.2f}s (CPU {cpu:5.2f}s)  {rss / 1024:7.1f} MiB")
    for key in ("wall_s", "rss_kb", "cpu_s"):
        rec[key] = summary(rec[key])
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
