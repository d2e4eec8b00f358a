"""The plans (and the Makefiles and ninja files of the same DAGs) that the
benchmarks run. Every engine plan is N tasks of one provider, effect `none`,
no validations, no acceptance checks, budgets that never stop the run."""

import json
import random

# The provider and action of a task, by the name the results use.
#   command: one process per task, `true`, in the default sandbox (Landlock,
#            the run's network and mount namespaces, a cgroup per process,
#            the minimal environment): what a user gets
#   command-unconfined: the same with `"sandbox": "none"` (no Landlock, no
#            namespaces; still a cgroup per process and the minimal
#            environment): like for like with make and ninja, which confine
#            nothing
#   builtin: no process; the engine's own bookkeeping only (durable step)
PROVIDERS = {
    "command": ({"kind": "command"}, {"run": ["true"]}),
    "command-unconfined": ({"kind": "command", "sandbox": "none"}, {"run": ["true"]}),
    "builtin": ({"kind": "builtin"}, {"op": "noop"}),
}


def deps_of(shape, n, seed=42):
    """Dependency lists by task index for a shape."""
    if shape == "chain":
        return [[] if i == 0 else [i - 1] for i in range(n)]
    if shape == "fanout":
        # One root, N-1 leaves that each depend on it.
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


def plan_doc(n, provider, deps, effect="none"):
    config, action = PROVIDERS[provider]
    tasks = [{"ref": f"t{i}", "provider": "p", "action": action, "effect": effect,
              "depends_on": [f"t{d}" for d in ds]} for i, ds in enumerate(deps)]
    return {
        "version": 1,
        "goal": {"id": "bench", "statement": f"{n} trivial {provider} tasks"},
        "budgets": {
            "max_attempts_per_task": 3,
            "max_revisions": 3,
            "max_provider_calls": 10 * n + 10,
            "max_cost": 0,
            "deadline_seconds": 86400,
        },
        "providers": {"p": config},
        "tasks": tasks,
    }


def write_plan(path, shape, n, provider="command", seed=42, effect="none"):
    doc = plan_doc(n, provider, deps_of(shape, n, seed), effect)
    if shape == "dag":
        # File order is not dependency order: make the engine sort it.
        random.Random(seed + 1).shuffle(doc["tasks"])
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))


def write_makefile(path, shape, n):
    """Phony targets t0..t(N-1), recipe `true`, the plan's dependencies.
    GNU make runs a recipe without a shell when it has no shell syntax."""
    deps = deps_of(shape, n)
    names = [f"t{i}" for i in range(n)]
    with open(path, "w") as f:
        goal = [names[-1]] if shape == "chain" else (names[1:] or names[:1])
        f.write("all: " + " ".join(goal) + "\n")
        f.write(".PHONY: all " + " ".join(names) + "\n")
        for i, ds in enumerate(deps):
            f.write(f"t{i}:" + "".join(f" t{d}" for d in ds) + "\n\ttrue\n")


def write_ninja(path, shape, n):
    """Targets t0..t(N-1) that are never written, so each runs once, in
    dependency order (implicit dependencies). ninja always starts a command
    as `/bin/sh -c`; `command = true` is one exec per target, like the
    engine's and make's: the shell (dash here) is the one process ninja
    execs, and it runs `true` as a builtin. (`exec true` would exec twice:
    the shell, then /usr/bin/true.)"""
    deps = deps_of(shape, n)
    with open(path, "w") as f:
        f.write("rule t\n  command = true\n\n")
        for i, ds in enumerate(deps):
            implicit = (" | " + " ".join(f"t{d}" for d in ds)) if ds else ""
            f.write(f"build t{i}: t{implicit}\n")
        goal = [f"t{n - 1}"] if shape == "chain" else [f"t{i}" for i in range(1, n)] or ["t0"]
        f.write("\ndefault " + " ".join(goal) + "\n")
