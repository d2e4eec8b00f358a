"""Workload (c), the process DAG: N tasks that each exec `true` once, as a
chain and as a fan-out, run by the engine (in its default sandbox, and with
`"sandbox": "none"`), by a bare spawn loop, by GNU make and by ninja, each
in a fresh folder; the tools alternate within each repeat.

One exec per task on every side: the engine's command provider execs
`true`; make execs `true` without a shell; ninja's `command = true` execs
`/bin/sh -c true`, whose shell (dash) runs `true` as a builtin.

The targets are judged on the engine with `"sandbox": "none"` against
ninja: like for like, since ninja and make confine nothing. The default
sandbox (Landlock, the run's namespaces) is reported beside it: what a
user gets, and what the confinement costs."""

import os
import shutil
import time

from common import Failed, Scratch, cpu_now, log, ratio, run_ok, summary, tail, store_of
from plans import write_makefile, write_ninja, write_plan


def bare_spawn(shape, n, jobs):
    """Spawn `true` n times in the DAG's shape from this process; return
    (wall, CPU) seconds, CPU of this process and the `true`s."""
    env = dict(os.environ)
    c0 = cpu_now()
    t0 = time.perf_counter()
    if shape == "chain" or jobs <= 1:
        for _ in range(n):
            _wait_ok(os.waitpid(os.posix_spawnp("true", ["true"], env), 0)[1])
    else:
        # Root first, then the leaves with `jobs` in flight.
        _wait_ok(os.waitpid(os.posix_spawnp("true", ["true"], env), 0)[1])
        running, left = set(), n - 1
        while left or running:
            while left and len(running) < jobs:
                running.add(os.posix_spawnp("true", ["true"], env))
                left -= 1
            pid, st = os.waitpid(-1, 0)
            _wait_ok(st)
            running.discard(pid)
    return time.perf_counter() - t0, cpu_now() - c0


def _wait_ok(status):
    if os.waitstatus_to_exitcode(status) != 0:
        raise Failed("`true` failed")


def tools(args, shape, n, src):
    """(name, files to copy into the folder, argv) of every tool measured."""
    jobs = 1 if shape == "chain" else args.jobs
    # The store's place follows the folder it runs in (common.store_of).
    engine = lambda ws: [args.engine, "run", "plan.json", "--jobs", str(args.jobs), "--store", store_of(ws)]  # noqa: E731
    out = [("engine", [(src["plan"], "plan.json")], engine),
           ("engine-unconfined", [(src["plan-unconfined"], "plan.json")], engine),
           ("make", [(src["mk"], "Makefile")], ["make", "-r", "-R", "-s", f"-j{jobs}", "-f", "Makefile"])]
    if shutil.which("ninja"):
        out.append(("ninja", [(src["ninja"], "build.ninja")], ["ninja", "-j", str(jobs), "--quiet"]))
    return out


def bench_dag(args, shape, n, repeats, plans_dir):
    src = {k: os.path.join(plans_dir, f"dag-{shape}-{n}.{k}") for k in ("plan", "plan-unconfined", "mk", "ninja")}
    write_plan(src["plan"], shape, n, "command")
    write_plan(src["plan-unconfined"], shape, n, "command-unconfined")
    write_makefile(src["mk"], shape, n)
    write_ninja(src["ninja"], shape, n)
    rec = {"shape": shape, "n": n, "jobs": args.jobs, "repeats": repeats,
           "tool_jobs": 1 if shape == "chain" else args.jobs, "wall_s": {}, "rss_kb": {}, "cpu_s": {},
           "bare_wall_s": [], "bare_cpu_s": []}
    if not shutil.which("ninja"):
        rec["ninja_missing"] = "ninja is not installed"
    for r in range(repeats):
        line = []
        for name, files, argv in tools(args, shape, n, src):
            with Scratch(args.tmpdir) as ws:
                for f, dest in files:
                    shutil.copy(f, os.path.join(ws, dest))
                # Beside the folder, not in it: the engine looks at its
                # workspace whole around each process task (issue 36), and
                # a file growing there while a task runs is that task's
                # undeclared write.
                out = ws.rstrip("/") + ".out"
                cmd = argv(ws) if callable(argv) else argv
                try:
                    wall, rss, cpu = run_ok(cmd, ws, out, f"{name} {shape} N={n}")
                    if name.startswith("engine") and r == 0:
                        said = open(out, errors="replace").read().count("succeeded")
                        if said < n:
                            raise Failed(f"engine {shape} N={n}: only {said} task lines say succeeded:\n{tail(out)}")
                finally:
                    if os.path.exists(out):
                        os.unlink(out)
            for key, v in (("wall_s", wall), ("rss_kb", rss), ("cpu_s", cpu)):
                rec[key].setdefault(name, []).append(v)
            line.append(f"{name} {wall:6.2f}s")
        bare, bare_cpu = bare_spawn(shape, n, args.jobs)
        rec["bare_wall_s"].append(bare)
        rec["bare_cpu_s"].append(bare_cpu)
        log(f"  dag {shape:6} N={n} #{r + 1}: " + ", ".join(line) + f", bare spawn {bare:6.2f}s")
    walls = rec["wall_s"]
    rec["summary"] = {name: {"wall_s": summary(walls[name]), "rss_kb": summary(rec["rss_kb"][name]),
                             "cpu_s": summary(rec["cpu_s"][name])} for name in walls}
    rec["summary"]["bare"] = {"wall_s": summary(rec["bare_wall_s"]), "cpu_s": summary(rec["bare_cpu_s"])}
    # Ratios of medians, and the engine's overhead over the bare spawn per task.
    rec["engine_over"] = {name: ratio(rec["summary"]["engine"]["wall_s"], rec["summary"][name]["wall_s"])
                          for name in rec["summary"] if name != "engine"}
    # Each engine configuration over make and ninja, repeat by repeat (the
    # tools ran one after the other in each): the median of those ratios is
    # the target's figure.
    rec["pair_ratios"] = {f"{e}/{t}": summary([a / b for a, b in zip(walls[e], walls[t])])
                          for e in ("engine", "engine-unconfined") for t in ("make", "ninja") if t in walls}
    rec["overhead_ms_per_task"] = summary([(e - b) / n * 1000 for e, b in zip(walls["engine"], rec["bare_wall_s"])])
    return rec
