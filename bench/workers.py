#!/usr/bin/env python3
"""Workers on one PostgreSQL ledger (issue 17): 1, 2 and 4 `engine worker`
processes on one goal of 64 independent tasks that each sleep 200 ms,
against SQLite's `engine run` on the same plan.

The tasks are `builtin` tasks (`{"op": "sleep", "ms": 200}`): no process
is spawned, so each figure is the engine's and the ledger's own cost.
Each worker runs one task at a time (`--jobs 1`), so the ideal is
64 x 0.2 s / workers.

    bench/workers.py [--engine PATH] [--tasks 64] [--sleep 0.2] [--workers 1,2,4]

Starts its own PostgreSQL server (the machine's initdb/pg_ctl under
/usr/lib/postgresql/*/bin, as the `postgres` user when run as root) in a
temporary folder on a loopback port, and removes it at the end. Prints a
Markdown table: wall time, throughput (tasks/s), per-task overhead
(wall x workers / tasks - sleep) and the speed-up over one worker.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        sys.exit("no PostgreSQL server binaries: apt-get install postgresql")
    return os.path.dirname(found[-1])


def as_pg(argv):
    return ["runuser", "-u", "postgres", "--"] + argv if os.geteuid() == 0 else argv


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp):
        self.bin, self.tmp, self.port = pg_bin(), tmp, free_port()
        self.data = os.path.join(tmp, "data")
        if os.geteuid() == 0:
            shutil.chown(tmp, "postgres")
        subprocess.run(as_pg([f"{self.bin}/initdb", "-D", self.data, "-U", "engine", "--auth=trust",
                              "--no-sync", "-E", "UTF8", "--locale=C"]), check=True, capture_output=True, cwd=tmp)
        opts = f"-p {self.port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections=100"
        subprocess.run(as_pg([f"{self.bin}/pg_ctl", "-D", self.data, "-o", opts, "-l",
                              os.path.join(tmp, "server.log"), "-w", "start"]), check=True, capture_output=True, cwd=tmp)

    def database(self, name):
        subprocess.run(as_pg([f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "engine",
                              "-d", "postgres", "-Atqc", f"CREATE DATABASE {name}"]), check=True, cwd=self.tmp)
        return f"postgres://engine@127.0.0.1:{self.port}/{name}"

    def stop(self):
        subprocess.run(as_pg([f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"]),
                       capture_output=True, cwd=self.tmp)


def plan(tasks, sleep):
    return {
        "version": 1,
        "goal": {"id": "wide", "statement": "every task once",
                 "acceptance": [{"id": "A1", "statement": "runs", "check": {"run": ["true"], "expect_exit": 0}}],
                 "constraints": []},
        "budgets": {"max_attempts_per_task": 3, "max_revisions": 3, "max_provider_calls": 100000,
                    "max_cost": 0, "deadline_seconds": 3600},
        "providers": {"b": {"kind": "builtin"}},
        "tasks": [{"ref": f"T{i:03}", "title": f"T{i:03}", "provider": "b", "effect": "none", "inputs": [],
                   "action": {"op": "sleep", "ms": round(sleep * 1000)}} for i in range(tasks)],
    }


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}


def timed_workers(engine, ws, url, n):
    subprocess.run([engine, "--json", "submit", "plan.json", "--store", url], cwd=ws, check=True,
                   capture_output=True, env=clean_env())
    start = time.monotonic()
    procs = []
    for i in range(n):
        wdir = os.path.join(ws, f"w{i}")
        os.makedirs(wdir, exist_ok=True)
        procs.append(subprocess.Popen([engine, "--json", "worker", "--goal", "wide", "--jobs", "1", "--store", url,
                                       "--workspace", wdir], cwd=ws, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=clean_env()))
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - start
    if any(codes):
        sys.exit(f"a worker failed: exit codes {codes}")
    return wall


def timed_sqlite(engine, ws):
    start = time.monotonic()
    subprocess.run([engine, "--json", "run", "plan.json", "--jobs", "1"], cwd=ws, check=True,
                   capture_output=True, env=clean_env())
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default=os.path.join(ROOT, "target", "release", "engine"))
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--sleep", type=float, default=0.2)
    ap.add_argument("--workers", default="1,2,4")
    a = ap.parse_args()
    a.engine = os.path.abspath(a.engine)
    counts = [int(x) for x in a.workers.split(",")]
    tmp = tempfile.mkdtemp(prefix="engine-bench-workers-")
    os.chmod(tmp, 0o755)  # the postgres user reaches its folder inside
    try:
        os.makedirs(os.path.join(tmp, "pg"))
        server = Server(os.path.join(tmp, "pg"))
        rows = []
        try:
            ws = os.path.join(tmp, "sqlite")
            os.makedirs(ws)
            with open(os.path.join(ws, "plan.json"), "w") as f:
                json.dump(plan(a.tasks, a.sleep), f)
            rows.append(("SQLite, `engine run --jobs 1`", 1, timed_sqlite(a.engine, ws)))
            for n in counts:
                ws = os.path.join(tmp, f"pg{n}")
                os.makedirs(ws)
                with open(os.path.join(ws, "plan.json"), "w") as f:
                    json.dump(plan(a.tasks, a.sleep), f)
                rows.append((f"PostgreSQL, {n} worker(s) x `--jobs 1`", n,
                             timed_workers(a.engine, ws, server.database(f"bench{n}"), n)))
        finally:
            server.stop()
        one = next((w for label, n, w in rows if n == 1 and label.startswith("PostgreSQL")), None)
        print(f"{a.tasks} tasks of `builtin sleep {round(a.sleep * 1000)} ms`, engine {a.engine}, "
              f"load average {os.getloadavg()[0]:.2f}\n")
        print("| store, workers | wall (s) | tasks/s | per-task overhead (ms) | speed-up vs 1 PG worker |")
        print("| --- | --- | --- | --- | --- |")
        for label, n, wall in rows:
            over = (wall * n / a.tasks - a.sleep) * 1000
            speed = f"{one / wall:.2f}x" if one and label.startswith("PostgreSQL") else "-"
            print(f"| {label} | {wall:.2f} | {a.tasks / wall:.1f} | {over:.0f} | {speed} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
