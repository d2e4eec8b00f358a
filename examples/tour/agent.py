"""Task `summarise`: a stand-in for an AI agent CLI, speaking agent-json.

It reads the engine's request on stdin (goal, task, operation_id, try and,
on a repair, the failure evidence and the instruction; docs/agent-json.md),
does the work, and prints its report as the last line of stdout. The engine
keeps that report as a claim; the task's validation decides. Python 3
standard library only.
"""
import json
import sys

request = json.load(sys.stdin)
with open("prices.json", encoding="utf-8") as f:
    prices = json.load(f)
lines = [f"- {item}: {cents / 100:.2f}" for item, cents in sorted(prices.items())]
total = sum(prices.values()) / 100
with open("summary.md", "w", encoding="utf-8") as f:
    f.write("# Price list\n\n" + "\n".join(lines) + f"\n\nTotal: {total:.2f}\n")
print(f"agent: try {request['try']} of {request['operation_id']} for task {request['task']['ref']}")
print(json.dumps({"status": "done", "summary": "wrote summary.md", "claimed_cause": None}))
