//! `engine explain REF`: every attempt of a task with its evidence, its
//! classification (rule and evidence ids) and, kept apart, its claims.

use serde_json::{json, Value};

use super::Output;
use crate::clock::utc;
use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::ids::GoalId;
use crate::plan::model::ProviderSpec;
use crate::store::attempts::AttemptRecord;
use crate::store::events::EventKind;
use crate::store::{LedgerRead, Store};

pub fn render(store: &Store, goal: Option<&GoalId>, task_ref: &str) -> Result<Output> {
    let ledger = store.read();
    let g = ledger.goal_or_latest(goal)?;
    let tasks = ledger.tasks(&g.id, g.active_revision)?;
    let task = tasks.iter().find(|t| t.task_ref == task_ref).ok_or_else(|| {
        crate::commands::no_task(&g.id, g.active_revision, task_ref, tasks.iter().map(|t| t.task_ref.as_str()))
    })?;
    let mut text = format!(
        "task {task_ref}  state {}  (goal {}, revision {})\noperation {}\n",
        task.state, g.id, g.active_revision, task.operation_id
    );
    let row = ledger.revision(&g.id, g.active_revision)?;
    let plan: crate::plan::PlanFile = serde_json::from_str(&row.plan_json)
        .map_err(|e| Error::new(crate::error::Code::StoreCorrupt, format!("stored plan does not parse: {e}")))?;
    if let Some(words) = blocked_on(task) {
        text.push_str(&words);
    }
    let approval = awaiting_approval(&*ledger, (&g, &row.plan_digest), &plan, task, &mut text)?;
    let asked = super::question::waiting(task_ref, &task.detail, "")
        .filter(|_| task.state == crate::state::TaskState::AwaitingInput);
    if let Some((words, _)) = &asked {
        text.push_str(words);
    }
    let place = crate::commands::advice::Place::of(&*ledger, &g)?;
    let next = crate::commands::advice::of_task(&*ledger, &g, &place, task)?;
    text.push_str(&super::next::of(&next, ""));
    let attempts = ledger.attempts_of_task(&g.id, task_ref)?;
    if let Some(line) = no_network_line(&*ledger, &plan, task, attempts.last())? {
        text.push_str(&line);
        text.push('\n');
    }
    // The reuse decision `engine revise` recorded for this task, if the
    // active revision came from one (its `revision_recorded` event).
    let reuse: Option<Value> = ledger
        .latest_event(&g.id, g.active_revision, EventKind::RevisionRecorded)?
        .and_then(|e| e.data["decisions"].as_array()?.iter().find(|d| d["task_ref"] == task_ref).cloned());
    if let Some(d) = &reuse {
        text.push_str(reuse_line(&*ledger, d, (&g, task))?.trim_end());
        text.push('\n');
    }
    if let Some((code, detail)) = task.stale() {
        text.push_str(&format!("completion stale, run again: {code} — {detail}\n"));
    }
    let (stale, kept) = rechecks(&*ledger, &g, task_ref, &mut text)?;
    let standing = super::standing::of_task(&*ledger, &g.id, g.active_revision, &plan, task_ref, task.state)?;
    if let Some(s) = &standing {
        text.push_str(&s.text);
        text.push('\n');
    }
    let mut attempts_json = Vec::new();
    // Numbered per task, every revision, in ledger order: the numbers
    // `engine output --attempt N` takes.
    // A provider with no process of its own (HTTP, builtin, a remote MCP
    // server) has no process sandbox to speak of.
    let process = plan
        .tasks
        .iter()
        .find(|t| t.task_ref == task_ref)
        .and_then(|t| plan.providers.get(&t.provider))
        .is_none_or(|p| matches!(p, ProviderSpec::Command { .. } | ProviderSpec::Mcp { command: Some(_), .. }));
    for (i, a) in attempts.iter().enumerate() {
        attempts_json.push(attempt(&*ledger, a, (i as i64 + 1, process), &mut text)?);
    }
    let acts = super::person_acts::of_task(&*ledger, &g.id, task_ref, &mut text)?;
    let json = json!({"goal_id": g.id, "revision": g.active_revision, "task_ref": task_ref, "state": task.state,
        "operation_id": task.operation_id, "detail": task.detail, "reuse_decision": reuse,
        "awaiting_input": asked.map(|(_, j)| j), "awaiting_approval": approval,
        "completion": standing.map(|s| s.json), "stale": stale, "kept": kept, "attempts": attempts_json, "acts": acts, "next": next.json()});
    Ok(Output { text, json, exit_code: 0 })
}

/// Every time a run's re-check judged a completion of this task stale (a
/// changed input, a changed tool, an upstream that ran again), and every
/// time it kept one instead (its upstream ran again with byte-identical
/// outputs: early cutoff), in words (appended to `text`) and as JSON.
fn rechecks(
    ledger: &dyn LedgerRead,
    g: &crate::store::goals::GoalRecord,
    task_ref: &str,
    text: &mut String,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut of = |kind: EventKind, key: &str, words: &str| -> Result<Vec<Value>> {
        Ok(ledger
            .events_of_goal(&g.id, kind)?
            .into_iter()
            .filter(|e| e.task_ref.as_deref() == Some(task_ref) && e.revision == Some(g.active_revision))
            .map(|e| {
                let (code, detail) = (e.data[key].as_str().unwrap_or("?"), e.data["detail"].as_str().unwrap_or(""));
                let detail_shown = super::escape::for_terminal(detail);
                text.push_str(&format!("completion {words} at {}: {code}: {detail_shown}\n", utc(e.at_ms)));
                json!({"at_ms": e.at_ms, key: code, "detail": detail})
            })
            .collect())
    };
    let stale = of(EventKind::CompletionStale, "stale", "judged stale")?;
    let kept = of(EventKind::CompletionKept, "kept", "kept")?;
    Ok((stale, kept))
}

/// For a failed task whose process had no network (none declared for it
/// or its provider) and whose latest attempt's output shows a refused or
/// unreachable connection: the line that says so and what to declare.
fn no_network_line(
    ledger: &dyn LedgerRead,
    plan: &crate::plan::PlanFile,
    task: &crate::store::goals::TaskRecord,
    latest: Option<&AttemptRecord>,
) -> Result<Option<String>> {
    let (Some(latest), crate::state::TaskState::Failed) = (latest, task.state) else { return Ok(None) };
    let Some(t) = plan.tasks.iter().find(|t| t.task_ref == task.task_ref) else { return Ok(None) };
    let Some(spec) = plan.providers.get(&t.provider) else { return Ok(None) };
    let process = matches!(spec, ProviderSpec::Command { .. } | ProviderSpec::Mcp { command: Some(_), .. });
    if !process || spec.unconfined() || !crate::plan::reach::Reach::of_task(t, spec).connect.is_empty() {
        return Ok(None);
    }
    let evidence = ledger.evidence_of_attempt(latest.id)?;
    let outputs: Vec<&str> = evidence
        .iter()
        .flat_map(|r| match &r.evidence {
            Evidence::ProcessExit { stdout, stderr, .. } => vec![stdout.excerpt.as_str(), stderr.excerpt.as_str()],
            _ => Vec::new(),
        })
        .collect();
    let command: Vec<&str> =
        t.action.get("run").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    Ok(super::words::no_network(&outputs, &command))
}

/// For a blocked task: what it waits on (its dependencies and their
/// states, or the operation whose request is the same as its own).
fn blocked_on(task: &crate::store::goals::TaskRecord) -> Option<String> {
    if task.state != crate::state::TaskState::Blocked {
        return None;
    }
    let waits: Vec<&str> = task
        .detail
        .get("waits_on")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |l| l.iter().filter_map(Value::as_str).collect());
    let said = match (waits.is_empty(), task.why()) {
        (false, _) => format!("waits on {}", waits.join(", ")),
        (true, Some(why)) => why.to_string(),
        (true, None) => "waits on a dependency that has not completed".to_string(),
    };
    Some(format!("blocked: {}\n", super::escape::for_terminal(&said)))
}

/// For a task waiting on a person's approval: the call's cost as the
/// active plan declares it, and the approval given for it, if any (fresh,
/// or stale and why), in words (appended to `text`) and as JSON.
fn awaiting_approval(
    ledger: &dyn LedgerRead,
    (g, plan_digest): (&crate::store::goals::GoalRecord, &str),
    plan: &crate::plan::PlanFile,
    task: &crate::store::goals::TaskRecord,
    text: &mut String,
) -> Result<Option<Value>> {
    if task.state != crate::state::TaskState::AwaitingApproval {
        return Ok(None);
    }
    let cost = plan.tasks.iter().find(|t| t.task_ref == task.task_ref).map(|t| t.cost()).unwrap_or_default();
    // A row the act chain does not vouch for is no approval (the acts
    // below name it STORE_TAMPERED).
    let tampered = ledger.unvouched_acts(Some(&g.id))?;
    let approvals: Vec<_> = ledger
        .approvals_of_goal(&g.id)?
        .into_iter()
        .filter(|a| !tampered.iter().any(|t| t.act == crate::store::acts::ActRef::Approval(a.id)))
        .collect();
    let given = crate::commands::advice::approval_given(&approvals, task, (g.active_revision, plan_digest));
    let now = crate::clock::now_ms();
    let words = match &given {
        None if tampered.is_empty() => "no approval given yet".to_string(),
        None => "no approval the act chain vouches for".to_string(),
        Some((a, stale)) if stale.is_empty() => {
            let left = a.expires_at_ms.map(|at| format!(" ({})", crate::decide::expiry::words(at, now)));
            let actor = super::escape::for_terminal(&a.actor);
            format!("approved by {actor} (approval #{}), not spent yet{}", a.id, left.unwrap_or_default())
        }
        Some((a, _)) if a.expires_at_ms.is_some_and(|at| now >= at) => format!(
            "approval #{} expired at {} UTC: never spent; a new approval is needed",
            a.id,
            crate::clock::utc(a.expires_at_ms.unwrap_or_default())
        ),
        Some((a, stale)) => format!("approval #{} is stale ({}): a new approval is needed", a.id, stale.join("; ")),
    };
    let why = task.why().map(|w| format!(" — {}", super::escape::for_terminal(w))).unwrap_or_default();
    text.push_str(&format!("waiting on a person's approval of its next call (cost {cost}){why}; {words}\n"));
    Ok(Some(json!({"cost": cost, "approval": given.map(|(a, stale)| json!({"id": a.id, "actor": a.actor,
        "stale": (!stale.is_empty()).then(|| stale.join("; ")), "expires_at_ms": a.expires_at_ms,
        "expired": a.expires_at_ms.is_some_and(|at| now >= at)}))})))
}

/// One attempt in words (appended to `text`) and as its JSON document.
fn attempt(
    ledger: &dyn LedgerRead,
    a: &AttemptRecord,
    (number, process): (i64, bool),
    text: &mut String,
) -> Result<Value> {
    text.push_str(&format!(
        "\nattempt {number}  r{}  try {}  {}  {}  intent {}\n",
        a.revision,
        a.try_no,
        a.kind,
        a.state,
        utc(a.intent_at_ms)
    ));
    match &a.sandbox {
        _ if !process => {}
        Some(s) => text.push_str(&format!("  sandbox: {s}\n")),
        None => text.push_str("  sandbox: not recorded (the attempt is older than the engine's sandbox)\n"),
    }
    if let Some(d) = &a.dispatch_detail {
        text.push_str(&format!("  handed to the provider: {d}\n"));
    }
    if let Some(h) = &a.handle {
        let at = a.handle_at_ms.map(utc).unwrap_or_default();
        text.push_str(&format!("  accepted by the provider as {} at {at}\n", crate::evidence::handle_words(h)));
    }
    if let Some(reason) = &a.unknown_reason {
        text.push_str(&format!("  no receipt: {reason}\n"));
    }
    let evidence = ledger.evidence_of_attempt(a.id)?;
    for r in &evidence {
        text.push_str(&format!("  evidence #{} {}\n", r.id, describe(&r.evidence)));
    }
    if let Some(c) = &a.classification {
        text.push_str(&format!(
            "  classification: {} by rule {} from evidence {}\n",
            c.class,
            c.rule,
            super::words::evidence_ids(&c.evidence_ids)
        ));
    }
    let claims = ledger.claims_of_attempt(a.id)?;
    for c in &claims {
        text.push_str(&format!(
            "  claim #{} by {} (not verified; never a cause or verdict): {}\n",
            c.id,
            c.authority,
            super::escape::for_terminal(&super::words::claim(&c.data))
        ));
    }
    Ok(json!({
        "number": number,
        "attempt": a,
        "receipt": ledger.receipt(a.id)?,
        "evidence": evidence.iter().map(|r| json!({"id": r.id, "evidence": r.evidence})).collect::<Vec<_>>(),
        "claims": claims,
    }))
}

/// The recorded reuse decision, in words (the attempt it reused by the
/// task's own numbering); a reuse on condition (early cutoff) says what
/// it waits on, and whether a run has decided it yet.
fn reuse_line(
    ledger: &dyn LedgerRead,
    d: &Value,
    (g, task): (&crate::store::goals::GoalRecord, &crate::store::goals::TaskRecord),
) -> Result<String> {
    use crate::decide::reuse::cutoff;
    if d["decision"].as_str() != Some("reuse") {
        let refusal = &d["refusal"];
        let detail: Vec<String> = refusal
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k != "reason")
                    .map(|(k, v)| format!("{k}: {}", v.as_str().map_or(v.to_string(), str::to_string)))
                    .collect()
            })
            .unwrap_or_default();
        return Ok(format!("reuse: run again, {} {}", refusal["reason"].as_str().unwrap_or("?"), detail.join(", ")));
    }
    let on: Vec<String> = serde_json::from_value(d["early_cutoff_on"].clone()).unwrap_or_default();
    let condition = match cutoff::condition_words(&on) {
        None => String::new(),
        Some(words) => {
            let kept = ledger.events_of_goal(&g.id, EventKind::CompletionKept)?.into_iter().any(|e| {
                e.revision == Some(g.active_revision) && e.task_ref.as_deref() == Some(task.task_ref.as_str())
            });
            let waiting =
                task.state == crate::state::TaskState::Reused && cutoff::waits_on(&task.detail, kept).is_some();
            let decided = if waiting { "not decided yet: the next run decides" } else { "decided by a run since" };
            format!("; on condition: {words} ({decided})")
        }
    };
    Ok(format!(
        "reuse: reused from revision {} {}{}{condition}",
        d["provenance"]["revision"],
        attempt_words(ledger, d["provenance"]["attempt_id"].as_i64()),
        super::words::evidence_clause_json(&d["provenance"]["evidence_ids"])
    ))
}

/// `attempt N` (the task's numbering) for a ledger attempt id; the id,
/// said as one, when the ledger cannot number it.
pub(super) fn attempt_words(ledger: &dyn LedgerRead, id: Option<i64>) -> String {
    let Some(id) = id else { return "an attempt".to_string() };
    match ledger.attempt_number(crate::ids::AttemptId(id)) {
        Ok(n) if n > 0 => format!("attempt {n}"),
        _ => format!("the attempt with ledger id {id}"),
    }
}

/// Each non-empty captured output: its size, whether it was cut, its excerpt.
fn push_outputs(s: &mut String, parts: &[(&str, &crate::evidence::Output)]) {
    for (name, o) in parts {
        if o.total_bytes > 0 {
            let cut = match (o.truncated, o.omitted) {
                (_, Some(gap)) => {
                    format!(
                        ", truncated to {}: its first and last bytes, {} in between not kept",
                        o.kept_bytes, gap.bytes
                    )
                }
                (true, None) => format!(", truncated to {}", o.kept_bytes),
                (false, None) => String::new(),
            };
            s.push_str(&format!("\n    {name}: {} bytes{cut}\n", o.total_bytes));
            s.push_str(&indent(&o.excerpt));
        }
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("      | {l}\n")).collect()
}

fn describe(e: &Evidence) -> String {
    match e {
        Evidence::ProcessExit { exit, timed_out, duration_ms, stdout, stderr } => {
            let mut s = format!(
                "provider process exit {} in {duration_ms} ms{}",
                exit_text(exit),
                if *timed_out { " (engine deadline hit; process group killed)" } else { "" }
            );
            push_outputs(&mut s, &[("stdout", stdout), ("stderr", stderr)]);
            s.trim_end().to_string()
        }
        Evidence::DescendantsEnded { processes, grace_ms, ended } => {
            crate::evidence::descendants_text(processes, *grace_ms, *ended)
        }
        Evidence::HttpResponse { status, body, duration_ms, body_cut } => {
            http_response(*status, body, *duration_ms, body_cut.as_deref())
        }
        Evidence::ToolResult { is_error, body, stderr, duration_ms } => {
            tool_result(*is_error, body, stderr, *duration_ms)
        }
        Evidence::BuiltinResult { op, timed_out, duration_ms } => builtin_text(op, *timed_out, *duration_ms),
        Evidence::CheckResult {
            check_id,
            exit,
            expect_exit,
            timed_out,
            passed,
            failing_assertion,
            stdout,
            stderr,
            checkpoint,
            of_constraint,
        } => {
            let mut s = format!(
                "{} {check_id}: {} (exit {}, expected {expect_exit}{})",
                if *of_constraint { "constraint check" } else { "check" },
                if *passed { "passed" } else { "FAILED" },
                exit_text(exit),
                if *timed_out { ", deadline hit" } else { "" }
            );
            if let Some(cp) = checkpoint {
                s.push_str(&format!(" against checkpoint {}", &cp[..16.min(cp.len())]));
            }
            if let Some(a) = failing_assertion {
                s.push_str(&format!("\n    failing assertion: {a}"));
            }
            if !passed {
                for o in [stdout, stderr] {
                    if !o.excerpt.is_empty() {
                        s.push('\n');
                        s.push_str(indent(&o.excerpt).trim_end());
                    }
                }
            }
            s
        }
        Evidence::ProtectedPathChanged { changes } => protected_changes(changes),
        Evidence::UndeclaredWrite { changes, more, outputs } => undeclared_writes(changes, *more, outputs.as_deref()),
        Evidence::SpendingReported { items, total_micros, may_spend } => {
            spending_words(items, *total_micros, *may_spend)
        }
        Evidence::Observation { observation, read_back } => observation_words(observation, read_back.as_ref()),
        Evidence::HandleLookup { handle, found, evidence } => format!(
            "asked the provider about {}: {} — {evidence}",
            crate::evidence::handle_words(handle),
            found.as_str()
        ),
        other => super::words::sentence(other).unwrap_or_else(|| other.kind().replace('_', " ")),
    }
}

/// An MCP tool's answer: an error or not, how long, its result and the
/// server's stderr as kept.
fn tool_result(is_error: bool, body: &crate::evidence::Output, stderr: &crate::evidence::Output, ms: u64) -> String {
    let mut s = format!("MCP tool answered{} in {ms} ms", if is_error { " with an error" } else { "" });
    push_outputs(&mut s, &[("result", body), ("server stderr", stderr)]);
    s.trim_end().to_string()
}

/// An HTTP answer: its status, how long it took, a body cut short (why),
/// and the body as kept.
fn http_response(status: u16, body: &crate::evidence::Output, duration_ms: u64, cut: Option<&str>) -> String {
    let mut s = format!("HTTP {status} in {duration_ms} ms");
    if let Some(cut) = cut {
        s.push_str(&format!("; the body was cut short: {cut}"));
    }
    push_outputs(&mut s, &[("body", body)]);
    s.trim_end().to_string()
}

/// A re-observation: its summary (request, answer, verdict, deciding
/// rule) and, for a read-back, the answer's excerpt.
fn observation_words(o: &providers::Observation, read_back: Option<&crate::evidence::ReadBackRecord>) -> String {
    let (verdict, summary) = match o {
        providers::Observation::EffectPresent { evidence } => ("present", evidence),
        providers::Observation::EffectAbsent { evidence } => ("absent", evidence),
        providers::Observation::Inconclusive { evidence } => ("inconclusive", evidence),
    };
    let mut s = match read_back {
        Some(r) => super::words::read_back(verdict, r),
        None => format!("observed {verdict}: {}", super::words::read_back_summary(summary)),
    };
    if let Some(answer) = read_back.and_then(|r| r.answer.as_ref()) {
        push_outputs(&mut s, &[("answer", answer)]);
    }
    s.trim_end().to_string()
}

/// What a provider's report said it spent, as its word (shared with the
/// HTML report).
pub fn spending_words(items: &[crate::evidence::SpentItem], total_micros: i64, may_spend: bool) -> String {
    let list: Vec<String> = items.iter().map(crate::evidence::SpentItem::words).collect();
    let mut s = format!(
        "spending reported by the provider, not verified by the engine: {} = {}; counted against max_cost",
        crate::cost::Cost::from_micros(total_micros),
        list.join(" + ")
    );
    if !may_spend && total_micros > 0 {
        s.push_str("; the task does not declare `may_spend`, so this is a violated constraint (a task that may spend says `\"may_spend\": true`, in a revision)");
    }
    s
}

/// Every protected path an attempt changed, with its digests before and
/// after (`absent` for a file that was not there).
pub fn protected_changes(changes: &[crate::evidence::PathChange]) -> String {
    let digest = |d: &Option<String>| {
        d.as_deref().map_or("absent".to_string(), |d| crate::checkpoint::mode::shown(d, super::short).into_owned())
    };
    let mut s = format!("{} changed during the attempt:", super::count(changes.len(), "protected path"));
    for c in changes {
        s.push_str(&format!(
            "\n    {} {} (constraint {}): {} -> {}",
            c.what(),
            c.path,
            c.constraints.join(", "),
            digest(&c.before),
            digest(&c.after)
        ));
    }
    s
}

/// Every file an attempt wrote that its task does not declare, and the
/// exact `outputs` line that would declare them (shared with the HTML
/// report). Paths are escaped: a file name is the agent's choice.
pub fn undeclared_writes(changes: &[crate::evidence::PathChange], more: usize, outputs: Option<&[String]>) -> String {
    let mut s = format!(
        "{} written that the task does not declare (a task writes only its `outputs`):",
        super::count(changes.len() + more, "file")
    );
    for c in changes {
        let never = match crate::decide::declared::never_output(&c.path) {
            true => " (never an output: a VCS or engine folder)",
            false => "",
        };
        let moved = crate::checkpoint::mode::moved(c.before.as_deref(), c.after.as_deref());
        let mode = moved.map(|(m, n)| format!(" (mode {m} -> {n})")).unwrap_or_default();
        s.push_str(&format!("\n    {} {}{mode}{never}", c.what(), shown_path(&c.path)));
    }
    if more > 0 {
        s.push_str(&format!("\n    … and {more} more"));
    }
    if let Some(line) = outputs {
        let line = serde_json::to_string(line).unwrap_or_default();
        s.push_str(&format!("\n    to declare them: \"outputs\": {}", super::escape::for_terminal(&line)));
    }
    s
}

/// A file name as shown on one line: hidden characters and newlines
/// escaped (a file name is the agent's choice).
fn shown_path(path: &str) -> String {
    super::escape::for_terminal(&path.replace('\n', "\\n").replace('\t', "\\t")).into_owned()
}

/// How a builtin call ended, in words (shared with the HTML report).
pub(super) fn builtin_text(op: &providers::builtin::Op, timed_out: bool, duration_ms: u64) -> String {
    let what = match op {
        providers::builtin::Op::Noop => "builtin noop".to_string(),
        providers::builtin::Op::Sleep { ms } => format!("builtin sleep of {ms} ms"),
    };
    let cut = if timed_out { " (engine deadline hit; the sleep was cut short)" } else { "" };
    format!("{what} answered in {duration_ms} ms{cut}")
}

fn exit_text(exit: &Option<providers::ExitStatus>) -> String {
    match exit {
        Some(providers::ExitStatus::Code { code }) => format!("code {code}"),
        Some(providers::ExitStatus::Signal { signal }) => format!("signal {signal}"),
        None => "unknown".into(),
    }
}
