"""The qualification suite: scenario checks run against the candidate binary
end to end, each in its own temporary copy of the fixtures.

Every check states what a pass claims and what it does not claim; the
manifest carries both next to the verdict.
"""

import json
import re
import time
from pathlib import Path

from harness import CheckFailed

CHECKS = []


def check(id, title, claims, does_not_claim):
    def wrap(fn):
        CHECKS.append({"id": id, "title": title, "claims": claims, "does_not_claim": does_not_claim, "fn": fn})
        return fn
    return wrap


def write_json(path, doc):
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")


def money_plan(ws):
    return json.loads((ws / "plan.json").read_text())


def refusal_reason(decision):
    """The reason code of a `run` decision (`refusal.reason`), else None."""
    ref = decision.get("refusal")
    return ref.get("reason") if isinstance(ref, dict) else None


def task_states(doc):
    """{ref: state} from a run report (`tasks[].task_ref`) or a status
    (`tasks[].ref`)."""
    return {t.get("task_ref", t.get("ref")): t["state"] for t in doc["tasks"]}


# ------------------------------------------------------------- identity

VERSION_RE = re.compile(r"^engine (\d+\.\d+\.\d+\S*) \(([0-9a-f]{12}|unknown)(\+dirty)?\)$")


@check(
    "version_identifies_build",
    "`engine --version` names the version and the source commit it was built from",
    "The candidate prints `engine X.Y.Z (COMMIT[+dirty])`; when this run installed it from the tree, "
    "COMMIT is the tree's HEAD and `+dirty` matches uncommitted changes to the sources that build it (engine/, providers/, Cargo.toml, Cargo.lock).",
    "That the binary was really compiled from that commit (the version line is text the build embedded); "
    "for a --candidate binary, nothing about its source beyond what it prints.",
)
def version_identifies_build(c):
    s = c.engine("--version", cwd=c.dir)
    line = s.stdout.strip()
    m = VERSION_RE.match(line)
    c.expect(m is not None, "the version line %r has the form `engine X.Y.Z (COMMIT[+dirty])`" % line)
    src = c.suite.source
    if c.suite.installed_from_tree:
        c.expect_eq(m.group(2), src["head_short"], "commit in the version line vs the tree's HEAD")
        c.expect_eq(bool(m.group(3)), src["dirty"], "+dirty in the version line vs uncommitted changes to the binary's sources")
    else:
        c.note("candidate given with --candidate: its commit is recorded, not compared with this tree")


# ------------------------------------------------------------- money demo

@check(
    "money_demo_fail_explain_repair",
    "the money demo: a validation failure, explained from evidence, repaired to a satisfied goal",
    "`engine run` stops with exit 1 on T2 `validation_failed` (rule and evidence ids named, the failing assertion kept); "
    "`engine explain T2` shows the classification from evidence and the agent's report only as an `external_ai_message` claim; "
    "`engine repair T2` hands the evidence to the (scripted) agent, which fixes total(), and exits 0 with every acceptance check passed; "
    "`engine status` then says the goal is satisfied.",
    "That a real AI agent would fix the code (the agent is a deterministic script); anything about providers other than local commands.",
)
def money_demo(c):
    ws = c.fixture("money")
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=1)
    r = s.json()
    c.expect_eq(task_states(r), {"T1": "succeeded", "T2": "failed"}, "task states after the first run")
    t2 = [t for t in r["tasks"] if t["task_ref"] == "T2"][0]
    c.expect_eq(t2.get("class"), "validation_failed", "T2's failure class")
    c.expect_eq(r["failed"], ["T2"], "the failed tasks the stop names")

    s = c.engine("--json", "explain", "T2", cwd=ws)
    e = s.json()
    attempt = e["attempts"][-1]
    cl = attempt["attempt"]["classification"]
    c.expect_eq(cl["class"], "validation_failed", "explain: classification")
    c.expect(bool(cl.get("rule")) and bool(cl.get("evidence_ids")), "explain: the classification names its rule and evidence ids (%s, %s)" % (cl.get("rule"), cl.get("evidence_ids")))
    by_id = {ev["id"]: ev["evidence"] for ev in attempt["evidence"]}
    used = [by_id.get(i) for i in cl["evidence_ids"]]
    c.expect(all(u is not None for u in used), "explain: every evidence id the classification uses is shown")
    c.expect(any(u.get("kind") == "check_result" and u.get("passed") is False and "AssertionError" in (u.get("failing_assertion") or "") for u in used),
             "explain: the evidence is the failed validation with its failing assertion")
    claims = attempt.get("claims", [])
    c.expect(len(claims) >= 1 and all(cm.get("authority") == "external_ai_message" for cm in claims),
             "explain: the agent's report is kept as claim(s) with authority external_ai_message")
    text = c.engine("explain", "T2", cwd=ws).stdout
    c.expect("classification: validation_failed" in text, "explain (text) shows the classification line")

    s = c.engine("--json", "repair", "T2", cwd=ws, expect=0)
    r = s.json()
    c.expect_eq(r["goal_state"], "satisfied", "goal state after the repair")
    c.expect(r["acceptance"] and all(a["passed"] for a in r["acceptance"]), "every acceptance check passed after the repair")
    s = c.engine("--json", "status", cwd=ws)
    st = s.json()
    c.expect_eq(st["goal"]["state"], "satisfied", "status: goal state")
    c.expect_eq(task_states(st), {"T1": "succeeded", "T2": "succeeded"}, "status: task states")
    c.engine("status", cwd=ws)


# ------------------------------------------------------------- bad plans

def bad_plan_check(code, family, mutate, detail):
    @check(
        "bad_plan_" + code.lower(),
        "a plan with %s is refused with %s (exit 2), nothing run" % (family, code),
        "`engine check` and `engine run` on a copy of the money plan with %s exit 2 with `%s` on stderr "
        "(and as `error.code` under --json); `engine run` creates no store and changes no workspace file." % (detail, code),
        "That every possible plan of this family is caught (one representative plan is tried).",
    )
    def fn(c):
        ws = c.fixture("money")
        doc = money_plan(ws)
        mutate(doc)
        write_json(ws / "bad.json", doc)
        before = c.suite.tree_digest(ws)
        for cmd in ("check", "run"):
            s = c.engine(cmd, "bad.json", cwd=ws, expect=2)
            c.expect(code in s.stderr, "`engine %s` names %s on stderr" % (cmd, code))
        s = c.engine("--json", "run", "bad.json", cwd=ws, expect=2)
        c.expect_eq(s.json().get("error", {}).get("code"), code, "--json error.code")
        c.expect(not (ws / ".engine").exists(), "no store was created in the workspace")
        c.engine("status", cwd=ws, expect=2)  # and none where the store lives: nothing was registered
        c.expect_eq(c.suite.tree_digest(ws)["digest"], before["digest"], "workspace digest before and after (no task ran)")
    fn.__name__ = "bad_plan_" + code.lower()
    return fn


def _no_goal(d):
    del d["goal"]


def _unknown_field(d):
    d["tasks"][0]["retries"] = 3


def _cycle(d):
    d["tasks"][0]["depends_on"] = ["T2"]


def _unknown_dep(d):
    d["tasks"][1]["depends_on"] = ["T1", "T9"]


def _dup_ref(d):
    d["tasks"][1]["ref"] = "T1"
    d["tasks"][1]["depends_on"] = []


def _unknown_provider(d):
    d["tasks"][1]["provider"] = "llm"


def _outside(d):
    d["tasks"][0]["inputs"].append("../outside.txt")


bad_plan_check("GOAL_REQUIRED", "no goal", _no_goal, "the `goal` removed")
bad_plan_check("PLAN_INVALID", "an unknown field", _unknown_field, "an unknown field `tasks[0].retries`")
bad_plan_check("PLAN_CYCLE", "a dependency cycle", _cycle, "T1 and T2 depending on each other")
bad_plan_check("UNKNOWN_DEPENDENCY", "an unknown dependency", _unknown_dep, "T2 depending on a task T9 that does not exist")
bad_plan_check("DUPLICATE_TASK_REF", "two tasks with one ref", _dup_ref, "two tasks both named T1")
bad_plan_check("UNKNOWN_PROVIDER", "an unknown provider", _unknown_provider, "T2 using a provider `llm` the plan does not declare")
bad_plan_check("INPUT_OUTSIDE_WORKSPACE", "an input outside the workspace", _outside, "a T1 input `../outside.txt`")


# ------------------------------------------------------------- unknown outcome

def http_plan(goal_id, base, path, body, **task_extra):
    task = {"ref": "N1", "title": "deliver to the receiver", "provider": "hook",
            "action": {"body": body}, "effect": "external"}
    task.update(task_extra)
    return {
        "version": 1,
        "goal": {"id": goal_id, "statement": "the receiver has the delivery, once per approved call"},
        "budgets": {"max_attempts_per_task": 3, "max_revisions": 3, "max_provider_calls": 20, "max_cost": 10, "deadline_seconds": 600},
        "providers": {"hook": {"kind": "http", "endpoint": base + path}},
        "tasks": [task],
    }


def crash_to_unknown(c, ws, rcv):
    """Run with ENGINE_FAILPOINT=after_dispatch (the engine SIGKILLs itself
    after handing the request over), then run again: exit 3 naming the
    operation. Returns the operation id."""
    c.engine("run", "plan.json", cwd=ws, env={"ENGINE_FAILPOINT": "after_dispatch"}, expect="killed:SIGKILL")
    got = rcv.wait_deliveries(1)
    c.expect_eq(len(got), 1, "deliveries in the receiver's own log after the crash")
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=3)
    r = s.json()
    c.expect_eq(r.get("code"), "EXTERNAL_EFFECT_UNKNOWN", "the restarted run's stop code")
    c.expect_eq(len(r["unknown"]), 1, "unknown operations named by the stop")
    op = r["unknown"][0]["operation_id"]
    c.expect_eq(got[0]["key"], op, "the crashed delivery's Idempotency-Key is the operation id")
    c.expect_eq(len(rcv.deliveries()), 1, "the restarted run did not re-send (deliveries still 1)")
    s = c.engine("run", "plan.json", cwd=ws, expect=3)
    c.expect("EXTERNAL_EFFECT_UNKNOWN" in s.stdout and op in s.stdout, "text output names EXTERNAL_EFFECT_UNKNOWN and the operation")
    c.expect_eq(len(rcv.deliveries()), 1, "a second plain run did not re-send either")
    return op


@check(
    "unknown_outcome_settle_approve_retry",
    "a crash after dispatch: unknown outcome, a person's settlement, an approved retry, nothing else re-sent",
    "After the engine is SIGKILLed right after dispatching an external HTTP call, the next `engine run` exits 3 "
    "EXTERNAL_EFFECT_UNKNOWN naming the operation and sends nothing; `engine settle OP --outcome not_run` records it and runs nothing; "
    "`engine retry OP` exits 4 APPROVAL_REQUIRED and sends nothing; after `engine approve OP`, `engine retry OP` exits 0; "
    "the receiver's own log then holds exactly two deliveries, try 1 and try 2, with the same Idempotency-Key and body; "
    "a further run or retry sends nothing more.",
    "Behaviour on power loss or a crash of the whole host (only the engine process is killed); "
    "anything about a real external service (the receiver is a local fixture); "
    "that the settlement was true (it is a person's word).",
)
def unknown_outcome(c):
    rcv = c.receiver()
    ws = c.dir / "ws"
    ws.mkdir()
    write_json(ws / "plan.json", http_plan("qual-notify", rcv.base, "/notify", {"notice": "invoice INV-7 is ready"}))
    op = crash_to_unknown(c, ws, rcv)

    c.engine("settle", op, "--outcome", "not_run", "--note", "qualification: the person chose to treat try 1 as not run", cwd=ws)
    c.expect_eq(len(rcv.deliveries()), 1, "settling sent nothing")
    s = c.engine("--json", "status", cwd=ws)
    c.expect_eq(s.json()["effect_unknown"], [], "status: no unknown outcome left after the settlement")

    s = c.engine("--json", "retry", op, cwd=ws, expect=4)
    r = s.json()
    c.expect_eq(r.get("code"), "APPROVAL_REQUIRED", "retry without an approval: stop code")
    c.expect_eq([a["operation_id"] for a in r["awaiting_approval"]], [op], "retry without an approval names the operation it waits on")
    c.expect_eq(len(rcv.deliveries()), 1, "the unapproved retry sent nothing")

    c.engine("approve", op, "--note", "qualification: re-send once", cwd=ws)
    c.expect_eq(len(rcv.deliveries()), 1, "approving sent nothing")
    s = c.engine("--json", "retry", op, cwd=ws, expect=0)
    c.expect_eq(s.json()["goal_state"], "satisfied", "goal state after the approved retry")
    d = rcv.deliveries()
    c.expect_eq([(x["key"], x["try"]) for x in d], [(op, 1), (op, 2)], "receiver log: (Idempotency-Key, Engine-Try) of every delivery")
    c.expect(d[0]["body"] == d[1]["body"], "both deliveries carry the same body")

    c.engine("run", "plan.json", cwd=ws, expect=0)
    c.engine("retry", op, cwd=ws, expect=2)
    c.expect_eq(len(rcv.deliveries()), 2, "a later run and a refused retry sent nothing more")


# ------------------------------------------------------------- approvals

@check(
    "approval_stale_after_plan_change",
    "an approval given for one plan revision does not allow the call in the next",
    "For a paid external task that needs an approval for every call: `engine run` exits 4 APPROVAL_REQUIRED and sends nothing; "
    "after `engine approve` and a revision of the plan that leaves the request unchanged, `engine run` exits 4 APPROVAL_STALE and sends nothing; "
    "a fresh approval lets exactly one delivery through and the goal is satisfied.",
    "Staleness for reasons other than a plan change; that the approver had authority (the engine records who, it does not authorise people).",
)
def approval_stale(c):
    rcv = c.receiver()
    ws = c.dir / "ws"
    ws.mkdir()
    plan = http_plan("qual-pay", rcv.base, "/pay", {"invoice": "INV-9", "cents": 1200}, cost=1, requires_approval=True)
    write_json(ws / "plan.json", plan)
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=4)
    r = s.json()
    c.expect_eq(r.get("code"), "APPROVAL_REQUIRED", "first run: stop code")
    op = r["awaiting_approval"][0]["operation_id"]
    c.expect_eq(len(rcv.deliveries()), 0, "nothing sent before an approval")

    c.engine("approve", op, "--note", "qualification: pay INV-9 once", cwd=ws)
    plan["budgets"]["max_provider_calls"] = 19
    write_json(ws / "plan2.json", plan)
    s = c.engine("--json", "digest", "plan2.json", cwd=ws)
    c.expect_eq(s.json()["tasks"][0]["operation_id"], op, "the revised plan sends the same request (same operation id)")
    c.engine("revise", "plan2.json", "--reason", "qualification: budget change only", "--no-run", cwd=ws)
    s = c.engine("--json", "run", "plan2.json", cwd=ws, expect=4)
    r = s.json()
    c.expect_eq(r.get("code"), "APPROVAL_STALE", "run after the revision: stop code")
    c.expect_eq([a["operation_id"] for a in r["awaiting_approval"]], [op], "the stale stop names the operation")
    c.expect_eq(len(rcv.deliveries()), 0, "the stale approval let nothing through")

    c.engine("approve", op, "--note", "qualification: pay INV-9 once, revision 2", cwd=ws)
    s = c.engine("--json", "run", "plan2.json", cwd=ws, expect=0)
    c.expect_eq(s.json()["goal_state"], "satisfied", "goal state after a fresh approval")
    c.expect_eq([(x["key"], x["try"]) for x in rcv.deliveries()], [(op, 1)], "receiver log: exactly one delivery")


@check(
    "approval_consumed_by_one_call",
    "one approval allows one call; the next try needs a new one",
    "For a paid external task that needs an approval for every call: one approval lets try 1 out (the engine is then killed after dispatch); "
    "after the unknown outcome is settled `not_run`, `engine retry` exits 4 because that approval was consumed, and sends nothing; "
    "a second approval lets try 2 out; the receiver's log holds exactly tries 1 and 2, and the event log shows each intent consuming a different approval.",
    "Anything about approvals given outside `engine approve` (there is no other way to give one to check).",
)
def approval_consumed(c):
    rcv = c.receiver()
    ws = c.dir / "ws"
    ws.mkdir()
    write_json(ws / "plan.json", http_plan("qual-charge", rcv.base, "/charge", {"card": "test", "cents": 500}, cost=1, requires_approval=True))
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=4)
    op = s.json()["awaiting_approval"][0]["operation_id"]
    s = c.engine("--json", "approve", op, "--note", "qualification: charge once", cwd=ws)
    first = s.json()["approval"]["approval_id"]
    c.engine("run", "plan.json", cwd=ws, env={"ENGINE_FAILPOINT": "after_dispatch"}, expect="killed:SIGKILL")
    c.expect_eq(len(rcv.wait_deliveries(1)), 1, "deliveries after the approved, crashed call")
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=3)
    c.expect_eq([u["operation_id"] for u in s.json()["unknown"]], [op], "the unknown operation")
    c.engine("settle", op, "--outcome", "not_run", "--note", "qualification: treat try 1 as not run", cwd=ws)
    s = c.engine("--json", "retry", op, cwd=ws, expect=4)
    c.expect_eq(s.json().get("code"), "APPROVAL_REQUIRED", "retry after the first approval was used: stop code")
    c.expect_eq(len(rcv.deliveries()), 1, "the consumed approval let nothing more through")
    s = c.engine("--json", "approve", op, "--note", "qualification: charge again, try 2", cwd=ws)
    second = s.json()["approval"]["approval_id"]
    c.engine("retry", op, cwd=ws, expect=0)
    c.expect_eq([(x["key"], x["try"]) for x in rcv.deliveries()], [(op, 1), (op, 2)], "receiver log: (key, try) of every delivery")
    s = c.engine("--json", "log", cwd=ws)
    intents = [e["data"] for e in s.json()["events"] if e["kind"] == "intent_recorded"]
    c.expect_eq([(i["try"], i.get("approval_consumed")) for i in intents], [(1, first), (2, second)],
                "event log: (try, approval consumed) of every intent")


# ------------------------------------------------------------- budgets

@check(
    "budget_attempts_exhausted",
    "a repair past max_attempts_per_task is refused with exit 5 before anything is sent",
    "With `max_attempts_per_task: 1`, after T2 fails, `engine repair T2` exits 5 BUDGET_EXHAUSTED naming the budget, its use and its limit, "
    "and the agent is not called (money.py is unchanged).",
    "Every budget kind (provider calls and the deadline are not exercised here; cost is checked separately).",
)
def budget_attempts(c):
    ws = c.fixture("money")
    doc = money_plan(ws)
    doc["budgets"]["max_attempts_per_task"] = 1
    write_json(ws / "plan.json", doc)
    c.engine("run", "plan.json", cwd=ws, expect=1)
    before = (ws / "money.py").read_bytes()
    s = c.engine("--json", "repair", "T2", cwd=ws, expect=5)
    r = s.json()
    c.expect_eq(r.get("code"), "BUDGET_EXHAUSTED", "stop code")
    b = r.get("budget") or {}
    c.expect_eq((b.get("budget"), b.get("used"), b.get("limit")), ("max_attempts_per_task", 1, 1), "the budget named, its use and limit")
    c.expect((ws / "money.py").read_bytes() == before, "the agent was not called (money.py unchanged)")
    s = c.engine("repair", "T2", cwd=ws, expect=5)
    c.expect("BUDGET_EXHAUSTED" in s.stdout + s.stderr, "text output names BUDGET_EXHAUSTED")


@check(
    "budget_cost_exhausted",
    "a paid call past max_cost is refused with exit 5 before it is dispatched",
    "With `max_cost: 1.5` and two calls costing 1 each, the first runs and the second is refused: exit 5 BUDGET_EXHAUSTED naming max_cost; "
    "the second command never ran (its marker file does not exist).",
    "That costs reported by a real paid provider are accounted (costs here are the plan's declared per-call numbers).",
)
def budget_cost(c):
    ws = c.dir / "ws"
    ws.mkdir()
    write_json(ws / "plan.json", {
        "version": 1,
        "goal": {"id": "qual-paid", "statement": "paid calls stop at max_cost"},
        "budgets": {"max_cost": 1.5},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [
            {"ref": "C1", "provider": "sh", "action": {"run": ["python3", "-c", "open('c1.marker','w').write('1')"]}, "effect": "local", "cost": 1, "outputs": ["c1.marker"]},
            {"ref": "C2", "provider": "sh", "action": {"run": ["python3", "-c", "open('c2.marker','w').write('2')"]}, "effect": "local", "cost": 1, "outputs": ["c2.marker"], "depends_on": ["C1"]},
        ],
    })
    s = c.engine("--json", "run", "plan.json", cwd=ws, expect=5)
    r = s.json()
    c.expect_eq(r.get("code"), "BUDGET_EXHAUSTED", "stop code")
    c.expect_eq((r.get("budget") or {}).get("budget"), "max_cost", "the budget named")
    c.expect((ws / "c1.marker").exists(), "the first paid call ran")
    c.expect(not (ws / "c2.marker").exists(), "the call past the limit never ran")


# ------------------------------------------------------------- revisions

@check(
    "revision_reuses_completed_tasks",
    "a revision that adds a task reuses the unchanged completed ones; a changed plan is refused without a revision",
    "After the money demo is satisfied, `engine run` with a changed plan exits 2 PLAN_CHANGED; `engine revise` of a plan adding T3 "
    "decides T1 and T2 `reuse` (with provenance: revision 1 and the attempt) and T3 `run` NO_PRIOR_COMPLETION, runs T3 only, and exits 0.",
    "Reuse under every refusal reason (only NO_PRIOR_COMPLETION and a reuse are exercised here; GOAL_DIGEST_CHANGED is checked separately).",
)
def revision_reuse(c):
    ws = c.fixture("money")
    c.engine("run", "plan.json", cwd=ws, expect=1)
    c.engine("repair", "T2", cwd=ws, expect=0)
    doc = money_plan(ws)
    doc["tasks"].append({"ref": "T3", "title": "report the total", "provider": "sh",
                         "action": {"run": ["python3", "-B", "-c", "from money import total; open('report.txt','w').write(str(total(['$1.25'])))"]},
                         "effect": "local", "inputs": ["money.py"], "outputs": ["report.txt"], "depends_on": ["T2"],
                         "validations": [{"id": "V3", "run": ["python3", "-c", "assert open('report.txt').read() == '125'"], "expect_exit": 0}]})
    # T3 changes only what it declares (`-B`: no `__pycache__` beside
    # money.py, which would be an undeclared write).
    write_json(ws / "plan2.json", doc)
    s = c.engine("run", "plan2.json", cwd=ws, expect=2)
    c.expect("PLAN_CHANGED" in s.stderr, "a changed plan without a revision: PLAN_CHANGED on stderr")
    s = c.engine("--json", "revise", "plan2.json", "--reason", "qualification: add a report task", cwd=ws, expect=0)
    r = s.json()
    dec = {d["task_ref"]: d for d in r["decisions"]}
    c.expect_eq({k: v.get("decision") for k, v in dec.items()}, {"T1": "reuse", "T2": "reuse", "T3": "run"}, "decisions")
    c.expect_eq(refusal_reason(dec["T3"]), "NO_PRIOR_COMPLETION", "T3's refusal reason")
    for ref in ("T1", "T2"):
        prov = dec[ref].get("provenance") or {}
        c.expect(prov.get("revision") == 1 and prov.get("attempt_id"), "%s's reuse names its provenance (revision 1, an attempt): %s" % (ref, prov))
    run = r["run"]
    c.expect_eq(task_states(run), {"T1": "reused", "T2": "reused", "T3": "succeeded"}, "task states of revision 2")
    c.expect_eq(run["goal_state"], "satisfied", "goal state of revision 2")
    c.expect((ws / "report.txt").read_text() == "125", "T3 ran")
    text = c.engine("--json", "status", cwd=ws).json()
    c.expect_eq(text["goal"]["active_revision"], 2, "status: active revision")


@check(
    "revision_goal_change_refuses_reuse",
    "a revision that changes the goal contract reuses nothing (GOAL_DIGEST_CHANGED)",
    "After the money demo is satisfied, `engine revise` of a plan whose goal statement changed reports the goal contract changed "
    "and decides every task `run` with reason GOAL_DIGEST_CHANGED; with --no-run it records the revision and runs nothing (exit 0).",
    "What the re-run then does (it is the plain run path, checked by the money demo).",
)
def revision_goal_changed(c):
    ws = c.fixture("money")
    c.engine("run", "plan.json", cwd=ws, expect=1)
    c.engine("repair", "T2", cwd=ws, expect=0)
    doc = money_plan(ws)
    doc["goal"]["statement"] += ", rounding nothing"
    write_json(ws / "plan3.json", doc)
    before = c.suite.tree_digest(ws)["digest"]
    s = c.engine("--json", "revise", "plan3.json", "--reason", "qualification: goal wording", "--no-run", cwd=ws, expect=0)
    r = s.json()
    c.expect_eq(r.get("goal_contract_changed"), True, "goal_contract_changed")
    got = {}
    for d in r["decisions"]:
        got[d["task_ref"]] = (d.get("decision"), refusal_reason(d))
    c.expect_eq(got, {"T1": ("run", "GOAL_DIGEST_CHANGED"), "T2": ("run", "GOAL_DIGEST_CHANGED")}, "decisions and reasons")
    c.expect_eq(c.suite.tree_digest(ws)["digest"], before, "--no-run ran nothing (workspace unchanged)")
    s = c.engine("revise", "plan3.json", "--reason", "again", "--no-run", cwd=ws, expect=2)


# ------------------------------------------------------------- store lock

@check(
    "store_locked_second_writer",
    "a second engine on a live store is refused with STORE_LOCKED (exit 6)",
    "While one `engine run` is executing a slow task, a second `engine run` on the same workspace exits 6 STORE_LOCKED and the first "
    "completes with exit 0.",
    "Lease takeover after a crash, or stores on network file systems.",
)
def store_locked(c):
    ws = c.dir / "ws"
    ws.mkdir()
    write_json(ws / "plan.json", {
        "version": 1,
        "goal": {"id": "qual-slow", "statement": "one slow local step"},
        "providers": {"sh": {"kind": "command"}},
        "tasks": [{"ref": "S1", "provider": "sh", "action": {"run": ["python3", "-c", "import time\nopen('started','w').close()\ntime.sleep(3)"]}, "effect": "local", "outputs": ["started"]}],
    })
    first = c.spawn("run", "plan.json", cwd=ws)
    try:
        deadline = time.monotonic() + 30
        while not (ws / "started").exists():
            if first.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        c.expect((ws / "started").exists(), "the first run started its slow task")
        s = c.engine("run", "plan.json", cwd=ws, expect=6)
        c.expect("STORE_LOCKED" in s.stderr, "STORE_LOCKED on stderr")
    except BaseException:
        c.finish(first, expect=None)
        raise
    c.finish(first, expect=0)
