"""Helpers every workload of bench.py shares: running a child process and
reading its rusage, scratch folders, summaries of repeated figures."""

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Failed(Exception):
    """A measured command did not do what the benchmark asked of it."""


TIME = "/usr/bin/time"


def unlimited_stack():
    """For a child (Popen's preexec_fn): no limit on its main thread's
    stack. ninja walks a 100,000-deep chain recursively and overflows the
    usual 8 MiB (SIGSEGV); the check workload gives both sides the same."""
    resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def run_child(argv, cwd, out_path, env=None, peak=True, preexec=None):
    """Run argv to completion, stdout and stderr to out_path.

    Returns (wall seconds, exit code, peak RSS KiB or None, CPU seconds).

    Peak RSS is what GNU time's `%M` ("Maximum resident set size" of
    `/usr/bin/time -v`) reports for argv: with peak=True the child runs under
    `/usr/bin/time -f %M -o FILE`. Not wait4()'s rusage of a child of this
    process: Linux starts a child's peak RSS at its parent's (a spawn shares
    or copies the parent's memory until the exec), so every child of this
    Python process would show at least its ~15 MiB. GNU time is about 1 MiB
    and forks: what it reports is the command's own figure (a `true`: about
    1 MiB). The wrapper adds one fork and exec (about 1-2 ms) to the wall
    time; with peak=False the command runs bare and the RSS is None.

    CPU is user + system of the child and of the descendants it waited for
    (a `true` spawned by the engine included), from wait4()."""
    rss_path = out_path + ".rss"
    if peak:
        argv = [TIME, "-f", "%M", "-o", rss_path, "--", *argv]
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, preexec_fn=preexec)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    rss = read_peak(rss_path) if peak else None
    return wall, code, rss, ru.ru_utime + ru.ru_stime


def read_peak(path):
    """GNU time's %M from its -o file (the last line; a killed command's file
    starts with "Command terminated by signal")."""
    try:
        with open(path) as f:
            lines = f.read().split()
        os.unlink(path)
        return int(lines[-1])
    except (OSError, ValueError, IndexError):
        return None


def run_ok(argv, cwd, out_path, what, env=None, preexec=None):
    """run_child, and Failed unless it exits 0."""
    wall, code, rss, cpu = run_child(argv, cwd, out_path, env, preexec=preexec)
    if code != 0:
        raise Failed(f"{what} exited {code}:\n{tail(out_path)}")
    return wall, rss, cpu


def tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return ""


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


# The engine refuses a store inside a folder its provider sandbox lets
# providers write (the workspace, the temporary folder): a workspace's
# store lives in a folder of its own under /var/tmp (the same disk here),
# removed with the workspace.
STORES = os.environ.get("BENCH_STORES") or "/var/tmp/engine-bench-stores"


def satisfied_in(text):
    """Did a run's summary end with the goal satisfied? A goal without an
    acceptance check says `goal completed: …` (satisfied, nothing beyond
    the tasks' own validations verified)."""
    return "goal satisfied" in text or "goal completed:" in text


def store_of(ws):
    """The engine store of workspace `ws`, outside every folder a provider
    may write."""
    return os.path.join(STORES, os.path.basename(os.path.normpath(ws)), "engine.db")


def drop_store(ws):
    shutil.rmtree(os.path.dirname(store_of(ws)), ignore_errors=True)


class Scratch:
    """A fresh temporary folder (and its engine store), removed afterwards."""

    def __init__(self, base, prefix="engine-bench-"):
        self.base = base
        self.prefix = prefix

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix=self.prefix, dir=self.base)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        drop_store(self.path)


def med(xs):
    return statistics.median(xs) if xs else None


def summary(xs):
    """Median, min and max of repeated figures, with the figures themselves."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "all": xs}


def ratio(a, b):
    """a / b of two summaries' medians (None when either is missing)."""
    if not a or not b or not b["median"]:
        return None
    return a["median"] / b["median"]


def sh(argv, cwd=None):
    """stdout of a short command, "" when it fails."""
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def engine_run(root, engine):
    """`engine run plan.json --jobs 2` in `root` with its own store; exits
    unless the goal is satisfied. Returns (wall, CPU) seconds."""
    out_path = root.rstrip("/") + ".out"
    cmd = [engine, "run", "plan.json", "--jobs", "2", "--store", store_of(root)]
    wall, code, _, cpu = run_child(cmd, root, out_path, peak=False)
    with open(out_path, errors="replace") as fh:
        out = fh.read()
    os.unlink(out_path)
    if code != 0 or not satisfied_in(out):
        sys.exit("engine run failed (%d):\n%s" % (code, out[-2000:]))
    return wall, cpu
