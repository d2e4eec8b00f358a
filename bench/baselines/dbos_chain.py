"""A DBOS Transact workflow of N `@DBOS.step` calls, SQLite system database
in FOLDER. Run by bench.py with bench/.venv's Python, one process per run.

usage: dbos_chain.py N FOLDER

Prints one JSON line: the steps done and the in-process time of the
workflow call alone (bench.py's figures are whole-process wall times)."""

import json
import os
import sys
import time

from dbos import DBOS, DBOSConfig

n = int(sys.argv[1])
folder = sys.argv[2]
config: DBOSConfig = {
    "name": "bench",
    # SQLite system database, as DBOS's docs configure it: sqlite:///path.
    "system_database_url": "sqlite:///" + os.path.join(folder, "dbos.sqlite"),
    "run_admin_server": False,
    "log_level": "WARNING",
}
DBOS(config=config)


@DBOS.step()
def noop(i):
    return i


@DBOS.workflow()
def chain(steps):
    last = -1
    for i in range(steps):
        last = noop(i)
    return last


DBOS.launch()
t0 = time.perf_counter()
result = chain(n)
inner = time.perf_counter() - t0
DBOS.destroy()
if result != n - 1:
    sys.exit(f"workflow returned {result}, expected {n - 1}")
print(json.dumps({"steps": n, "workflow_s": inner}))
