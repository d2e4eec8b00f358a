"""A LangGraph chain of N nodes with a SqliteSaver checkpointer (a SQLite
file in FOLDER). Run by bench.py with bench/.venv's Python, one process per
run.

usage: langgraph_chain.py N FOLDER [DURABILITY [SHAPE]]

SHAPE "chain" (the default) builds N distinct nodes n0 -> n1 -> ... ; each
checkpoint records the versions of every channel seen so far, so a step
costs more the longer the chain (quadratic in N). SHAPE "loop" is one node
that a conditional edge sends back to itself until it has run N times: N
steps, N checkpoints, a state that does not grow.

DURABILITY is LangGraph's `durability` of the invocation: "sync" (the
default here: each step's checkpoint is written before the next step
starts, the guarantee the engine gives its steps), "async" (LangGraph's
default: written while the next step runs) or "exit".

Prints one JSON line: the steps done, the graph build time and the
in-process time of the invocation alone (bench.py's figures are
whole-process wall times)."""

import json
import os
import sys
import time
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

n = int(sys.argv[1])
folder = sys.argv[2]
durability = sys.argv[3] if len(sys.argv) > 3 else "sync"
shape = sys.argv[4] if len(sys.argv) > 4 else "chain"


class State(TypedDict):
    i: int


def step(state):
    return {"i": state["i"] + 1}


t0 = time.perf_counter()
builder = StateGraph(State)
if shape == "loop":
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda state: "step" if state["i"] < n else END, ["step", END])
else:
    for k in range(n):
        builder.add_node(f"n{k}", step)
    builder.add_edge(START, "n0")
    for k in range(n - 1):
        builder.add_edge(f"n{k}", f"n{k + 1}")
    builder.add_edge(f"n{n - 1}", END)
with SqliteSaver.from_conn_string(os.path.join(folder, "checkpoints.sqlite")) as saver:
    graph = builder.compile(checkpointer=saver)
    t1 = time.perf_counter()
    out = graph.invoke({"i": 0}, {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10},
                       durability=durability)
    t2 = time.perf_counter()
if out["i"] != n:
    sys.exit(f"graph ended at {out['i']}, expected {n}")
print(json.dumps({"steps": n, "durability": durability, "shape": shape, "build_s": t1 - t0, "invoke_s": t2 - t1}))
