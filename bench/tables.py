"""The Markdown report of bench.py's results: the issue's targets first, then
one table per workload. Pure: results in, text out."""

MIB = 1024  # KiB per MiB

# Issues 16's and 28's targets: key -> (what is compared, the limit).
TARGETS = {
    "vs_dbos": ("engine per step / DBOS per step", 0.2),
    "vs_langgraph": ("engine per step / LangGraph per step", 0.2),
    "vs_floor": ("engine per step / disk floor of a step's commits", 1.5),
    "rss_1000": ("engine peak RSS, 1,000-step chain", 30.0),
    "dag_vs_ninja": ("process DAG wall, engine / ninja", 1.3),
    # Issue 38: the default sandbox (Landlock, network namespace, cgroup).
    "dag_sandbox_vs_ninja": ("process DAG wall, engine / ninja", 1.6),
    "noop_vs_ninja": ("no-op re-run wall, engine / ninja", 1.5),
    "check_vs_ninja": ("`engine check` / `ninja -n` wall", 1.0),
    "check_rss_vs_ninja": ("`engine check` / `ninja -n` peak RSS", 2.0),
}

# The engine configuration the process-DAG target is judged on: like for
# like with ninja and make, which confine nothing (bench/dag.py).
DAG_JUDGED = "engine-unconfined"


def ms(s, digits=3):
    """'median (min–max)' of a summary of milliseconds."""
    if not s:
        return "—"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


secs = ms  # the same format for seconds


def mib(kb):
    return "—" if kb is None else f"{kb / MIB:.1f}"


def times(x):
    return "—" if x is None else f"{x:.2f}×"


def verdict(value, limit, strict=False):
    if value is None:
        return "no figure"
    ok = value < limit if strict else value <= limit
    return "met" if ok else "missed"


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---------------------------------------------------------------- targets

def durable_row(res, system, n):
    for r in res.get("durable") or []:
        if r["system"] == system and r["n"] == n:
            return r
    return None


def per_step(row):
    """The median ms per step of a durable row, or None with the reason."""
    if row is None:
        return None, "not measured"
    if row.get("skipped"):
        return None, "not measured: " + row["skipped"]
    if row.get("failed"):
        return None, "failed: " + row["failed"].splitlines()[0]
    s = row.get("per_step_ms")
    return (s["median"], None) if s else (None, "no figure")


def versus_python_rows(res, n):
    """The durable step against DBOS and LangGraph: the engine's `none`
    steps (commits that wait for no disk) and, where measured, its
    `external` steps (intent flushed, as DBOS and SqliteSaver commit)."""
    rows = []
    for engine, durability in (("engine", "effect none: no flush"), ("engine-flushed", "effect external: FULL")):
        if durable_row(res, engine, n) is None:
            continue
        eng, why = per_step(durable_row(res, engine, n))
        for key, system, name in (("vs_dbos", "dbos", "DBOS"), ("vs_langgraph", "langgraph", "LangGraph chain"),
                                  ("vs_langgraph", "langgraph-loop", "LangGraph loop")):
            if durable_row(res, system, n) is None:
                continue
            text, limit = TARGETS[key]
            other, owhy = per_step(durable_row(res, system, n))
            value = quotient(eng, other)
            rows.append([f"{text} ({durability}), N = {n:,}", fmt_ms(eng, why), f"{name}: {fmt_ms(other, owhy)}",
                         times(value), f"≤ {limit}×", verdict(value, limit)])
    return rows


def target_rows(res):
    rows = []
    sizes = sorted({r["n"] for r in res.get("durable") or []})
    floor = res.get("floor")
    commits = res["args"].get("step_commits", 1)
    for n in sizes:
        eng, why = per_step(durable_row(res, "engine", n))
        rows.extend(versus_python_rows(res, n))
        text, limit = TARGETS["vs_floor"]
        fl = commits * floor["sqlite_commit_ms"]["median"] if floor and floor.get("sqlite_commit_ms") else None
        value = quotient(eng, fl)
        rows.append([f"{text}, N = {n:,}", fmt_ms(eng, why),
                     f"{commits} × SQLite WAL+FULL commit: {fmt_ms(fl, 'not measured')}",
                     times(value), f"≤ {limit}×", verdict(value, limit)])
    row = durable_row(res, "engine", 1000)
    text, limit = TARGETS["rss_1000"]
    if row is not None:
        _, why = per_step(row)
        peak = row["rss_n1_kb"]["max"] if not why and row.get("rss_n1_kb") else None
        value = peak * 1024 / 1e6 if peak else None
        rows.append([text, f"{value:.1f} MB ({peak / MIB:.1f} MiB)" if value else why, "—", "—",
                     f"< {limit:g} MB", verdict(value, limit, strict=True)])
    for r in res.get("dag") or []:
        nin = r["summary"].get("ninja", {}).get("wall_s")
        shape = "chain" if r["shape"] == "chain" else f"fan-out, --jobs {r['tool_jobs']}"
        for name in (DAG_JUDGED, "engine"):
            if name not in r["summary"]:
                continue
            text, limit = TARGETS["dag_vs_ninja" if name == DAG_JUDGED else "dag_sandbox_vs_ninja"]
            pair = (r.get("pair_ratios") or {}).get(f"{name}/ninja")
            value = pair["median"] if pair else r["engine_over"].get("ninja")
            eng = r["summary"][name]["wall_s"]["median"]
            what = "`\"sandbox\": \"none\"` (judged: like for like)" if name == DAG_JUDGED else \
                "default sandbox"
            rows.append([f"{text}, {shape}, N = {r['n']:,}, {what}",
                         f"{eng:.3f} s", f"ninja: {nin['median']:.3f} s" if nin else r.get("ninja_missing", "—"),
                         times(value), f"≤ {limit}×", verdict(value, limit)])
    noop = (res.get("noop") or {}).get("main")
    if noop:
        text, limit = TARGETS["noop_vs_ninja"]
        pair = (noop.get("pair_ratio_over") or {}).get("ninja")
        value = pair["median"] if pair else noop["ratio_engine_over"].get("ninja")
        nin = noop["noop_s"].get("ninja")
        rows.append([f"{text}, 1,000 tasks × 10 inputs", f"{noop['noop_s']['engine']['median']:.3f} s",
                     f"ninja: {nin['median']:.3f} s" if nin else "ninja is not installed",
                     times(value), f"≤ {limit}×", verdict(value, limit)])
    for c in (res.get("scale") or {}).get("check") or []:
        nin = c.get("ninja")
        if not nin:
            continue
        shape = f"{c['shape']}, N = {c['n']:,}"
        text, limit = TARGETS["check_vs_ninja"]
        value = c["pair_ratio_wall"]["median"] if c.get("pair_ratio_wall") else None
        rows.append([f"{text}, {shape}", f"{c['wall_s']['median']:.3f} s", f"`ninja -n`: {nin['wall_s']['median']:.3f} s",
                     times(value), f"≤ {limit}×", verdict(value, limit)])
        text, limit = TARGETS["check_rss_vs_ninja"]
        value = quotient(c["rss_kb"]["max"], nin["rss_kb"]["max"])
        rows.append([f"{text}, {shape}", f"{mib(c['rss_kb']['max'])} MiB", f"`ninja -n`: {mib(nin['rss_kb']['max'])} MiB",
                     times(value), f"≤ {limit}×", verdict(value, limit)])
    return rows


def quotient(a, b):
    """a / b of two per-step figures; None unless both are positive (a figure
    at or below zero means the start-up noise was larger than N steps)."""
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return a / b


def fmt_ms(value, why):
    return f"{value:.3f} ms" if value is not None else why


# ---------------------------------------------------------------- workloads

def durable_table(res):
    rows = []
    for r in res["durable"]:
        label = r["label"]
        if r.get("skipped") or r.get("failed"):
            why = r.get("skipped") or "FAILED: " + r["failed"].splitlines()[0]
            rows.append([label, f"{r['n']:,}", why, "", "", "", ""])
            continue
        if r["repeats_done"] < r["repeats"]:
            label += f" ({r['repeats_done']} of {r['repeats']} repeats: time cap)"
        rows.append([label, f"{r['n']:,}", ms(r["per_step_ms"]), ms(r["cpu_per_step_ms"]),
                     secs(r["wall_1_s"], 2), secs(r["wall_n1_s"], 2), mib(r["rss_n1_kb"]["max"])])
    return table(["system", "N", "ms per step", "CPU ms per step", "wall, 1 step (s)", "wall, N+1 steps (s)",
                  "peak RSS, N+1 steps (MiB)"], rows)


def floor_table(f, commits):
    rows = [["append 64 bytes + fsync", ms(f["fsync_ms"])],
            [f"one-row SQLite commit, WAL, synchronous=FULL (SQLite {f['sqlite_version']})", ms(f["sqlite_commit_ms"])],
            [f"floor of an engine step: {commits} such commits",
             f"{commits * f['sqlite_commit_ms']['median']:.3f}"]]
    return table(["operation", "ms per operation"], rows)


def dag_table(res):
    rows = []
    for r in res["dag"]:
        n = r["n"]
        pairs = r.get("pair_ratios") or {}
        for name, s in r["summary"].items():
            w = s["wall_s"]
            rss = s.get("rss_kb")
            cpu = s.get("cpu_s")
            over = [times((pairs.get(f"{e}/{name}") or {}).get("median")) if name in ("make", "ninja") else "—"
                    for e in ("engine-unconfined", "engine")]
            rows.append([r["shape"], f"{n:,}", name, secs(w), f"{w['median'] / n * 1000:.3f}",
                         f"{cpu['median'] / n * 1000:.3f}" if cpu else "—", mib(rss["max"]) if rss else "—", *over])
    return table(["shape", "N", "tool", "wall s", "ms per task", "CPU ms per task", "peak RSS MiB",
                  "`sandbox: none` engine / tool", "default-sandbox engine / tool"], rows)


def noop_table(res):
    rows = []
    for key, what in (("main", "1,000 tasks × 10 inputs"), ("dvc", "100 stages × 10 inputs")):
        r = res["noop"].get(key)
        if not r:
            continue
        if r.get("skipped"):
            rows.append([what, "dvc", r["skipped"], "", "", ""])
            continue
        for name, s in r["noop_s"].items():
            over = "—" if name == "engine" else times(r["ratio_engine_over"].get(name))
            rows.append([what, name, secs(s), mib(r["noop_rss_kb"].get(name)), f"{r['first_run_s'][name]:.2f}", over])
    return table(["tree", "tool", "no-op wall s", "peak RSS MiB", "first run s", "engine / tool"], rows)


def scale_table(res):
    s = res["scale"]
    rows = []
    for c in s["check"]:
        rows.append([f"`engine check`, {c['shape']}", f"{c['n']:,}", f"{c['plan_bytes'] / 1e6:.1f}",
                     secs(c["wall_s"], 2), mib(c["rss_kb"]["max"])])
        if c.get("ninja"):
            rows.append([f"`ninja -n`, {c['shape']} (build.ninja of the same DAG)", f"{c['n']:,}",
                         f"{c['ninja_bytes'] / 1e6:.1f}", secs(c["ninja"]["wall_s"], 2),
                         mib(c["ninja"]["rss_kb"]["max"])])
    run = s.get("run")
    if run and run.get("skipped"):
        rows.append(["`engine run`", "", "", run["skipped"], ""])
    elif run:
        first = run["first_run"]
        rows.append([f"`engine run`, first, {run['provider']} tasks, random DAG", f"{run['n']:,}", "",
                     f"{first['wall_s']:.2f}", mib(first["rss_kb"])])
        nr = run["noop_rerun"]
        rows.append(["`engine run`, no-op re-run (all reused)", f"{run['n']:,}", "", secs(nr["wall_s"], 2),
                     mib(nr["rss_kb"]["max"])])
    out = table(["what", "tasks", "plan MB", "wall s", "peak RSS MiB"], rows)
    if run and run.get("note"):
        out += f"\n\n{run['note']}."
    return out


# ---------------------------------------------------------------- document

def growth_table(res):
    """The builtin fan-out at each size: check and run, and the growth of
    each figure per tenfold of tasks (10.0× is linear)."""
    rows = []
    prev = None
    for g in res["growth"]:
        if g.get("skipped") or g.get("failed"):
            rows.append([f"{g['n']:,}", g.get("skipped") or "FAILED: " + g["failed"].splitlines()[0], "", "", "", ""])
            continue
        c, r = g["check"], g["run"]
        cells = [f"{g['n']:,}", f"{c['wall_s']:.2f}", mib(c["rss_kb"]), f"{r['wall_s']:.2f}", mib(r["rss_kb"]),
                 f"{r['wall_s'] / g['n'] * 1e6:.0f}"]
        if prev and prev["n"] * 10 == g["n"]:
            growth = [g["check"]["wall_s"] / prev["check"]["wall_s"], g["check"]["rss_kb"] / prev["check"]["rss_kb"],
                      g["run"]["wall_s"] / prev["run"]["wall_s"], g["run"]["rss_kb"] / prev["run"]["rss_kb"]]
            cells.append(" / ".join(f"{x:.1f}×" for x in growth))
        else:
            cells.append("—")
        rows.append(cells)
        prev = g
    return table(["tasks", "`engine check` s", "check peak RSS MiB", "`engine run` s", "run peak RSS MiB",
                  "run µs per task", "growth from 10× fewer (check s / RSS, run s / RSS; 10.0× = linear)"], rows)


def header(res):
    m = res["machine"]
    tools = ", ".join(f"{k} {v}" for k, v in m["tools"].items() if v)
    lines = [
        "# Benchmark results",
        "",
        f"`{res['command'].strip()}` at {res['when']}; engine `{(m['engine_commit'] or '?')[:12]}`"
        f"{' (+ local changes)' if m['engine_tree_dirty'] else ''}.",
        f"Machine: {m['cpus']} × {m['cpu_model']} ({m['hypervisor'] or 'bare metal'}), {m['mem_total_mib']} MiB, "
        f"Linux {m['kernel']}; workspaces and databases on {m['tmpdir']} ({m['tmpdir_fs']}).",
        f"Tools: {tools}; Python {m['python']} (bench), {m['venv_python'] or '—'} (bench/.venv).",
        f"1-minute load average: {m['loadavg_at_start']} at the start, {res.get('loadavg_at_end')} at the end "
        f"(above about 1.5 on {m['cpus']} CPUs, other work shared the machine and the figures are noisy).",
        "Each figure: median (min–max) of the repeats; whole processes; peak RSS as GNU time's `%M`.",
    ]
    if not res["builtin"]["supported"]:
        lines += ["", f"**Not measured: {res['builtin']['why']}** ({res['builtin']['check_said']}). "
                      "Every figure of the engine's `builtin` noop steps is left out, not replaced; the row "
                      "marked STAND-IN runs command `true` tasks instead (a process spawn per step) and is "
                      "no target figure."]
    for name, why in res.get("missing", {}).items():
        lines += ["", f"**{name} not measured:** {why}"]
    if res.get("failed"):
        lines += ["", f"**The run stopped early:** {res['failed'].splitlines()[0]}"]
    return "\n".join(lines)


def markdown(res):
    parts = [header(res)]
    rows = target_rows(res)
    if rows:
        parts.append("## Against the targets (issues 16 and 28)\n\n" +
                     table(["figure", "engine", "compared with", "ratio", "target", "verdict"], rows))
    if res.get("durable"):
        parts.append("## (a) Durable step\n\nA chain of N steps that do nothing; "
                     "per step = (wall at N+1 steps − wall at 1 step) / N, paired within each repeat.\n\n"
                     + durable_table(res))
    if res.get("floor"):
        parts.append("## (b) The disk's floor\n\n" + floor_table(res["floor"], res["args"].get("step_commits", 1)))
    if res.get("dag"):
        parts.append("## (c) Process DAG\n\nN tasks that each exec `true`; chain one at a time, fan-out "
                     f"(one root, N−1 leaves) with --jobs {res['args']['jobs']}; bare = a spawn loop in the "
                     "benchmark's own process. One exec per task on every side: the engine execs `true`, make "
                     "execs `true` without a shell, ninja's `command = true` execs `/bin/sh`, which runs `true` "
                     "as a builtin. `engine` runs in its default sandbox (what a user gets), `engine-unconfined` "
                     "with `\"sandbox\": \"none\"`: the target is judged on the latter, like for like (make "
                     "and ninja confine nothing). Ratios: the median of the repeats' ratios (the tools alternate "
                     "within a repeat).\n\n" + dag_table(res))
    if res.get("noop"):
        parts.append("## (d) No-op re-run\n\nEvery tool rebuilt once; then each re-run finds nothing to do.\n\n"
                     + noop_table(res))
    if res.get("scale"):
        parts.append("## (e) Scale\n\n" + scale_table(res))
    if res.get("growth"):
        parts.append("## (f) Growth: a fan-out of `builtin` noop tasks\n\nOne root, N−1 leaves; `engine check`, "
                     f"then `engine run --jobs {res['args']['jobs']}` in a fresh folder and store.\n\n"
                     + growth_table(res))
    return "\n\n".join(parts) + "\n"
