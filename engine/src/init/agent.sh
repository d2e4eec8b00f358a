#!/bin/sh
# A stand-in agent speaking the engine's agent-json protocol (docs/agent-json.md).
# The engine writes one JSON document on stdin: the goal, the task,
# operation_id, try, and on a repair the failure evidence and instruction.
# The agent does the work, then prints its report as its LAST stdout line:
#   {"status": "done" or "failed", "summary": "...", "claimed_cause": ...}
# The engine keeps that report as a claim; only the task's validations
# decide whether the work is good. Replace this script with a wrapper that
# hands the request to your agent CLI.
set -eu
request=$(cat)
operation=$(printf '%s' "$request" | sed -n 's/.*"operation_id":"\([^"]*\)".*/\1/p')
try=$(printf '%s' "$request" | sed -n 's/.*"try":\([0-9]*\).*/\1/p')
greeting=$(cat greeting.txt)
{
    printf '# Summary\n\n'
    printf 'greeting.txt says: %s\n' "$greeting"
    printf '\n(written by agent.sh for operation %s, try %s)\n' "$operation" "$try"
} > summary.md
echo "agent.sh: wrote summary.md"
printf '{"status": "done", "summary": "wrote summary.md", "claimed_cause": null}\n'
