//! Each task's details, shown when it is clicked: attempts with their
//! evidence, classification, claims (labelled not verified), the reuse
//! decision, approvals and settlements with who and their notes, and the
//! captured output excerpts — all escaped. Pure.

use std::fmt::Write;

use super::escape::{clip, text};
use super::{duration, state_class, time};
use crate::evidence::{Evidence, Output};
use crate::report::document::{AttemptReport, EvidenceItem, ReportDocument, TaskReport};

/// Longest output excerpt or claim shown (the engine bounds excerpts
/// already; `engine explain` and `--json` give what the ledger holds).
const EXCERPT_CHARS_MAX: usize = 16_384;
const CLAIM_CHARS_MAX: usize = 4_096;

pub fn tasks(doc: &ReportDocument, out: &mut String) {
    for (i, t) in doc.tasks.iter().enumerate() {
        task(doc, i, t, out);
    }
}

fn task(doc: &ReportDocument, i: usize, t: &TaskReport, out: &mut String) {
    let n = doc.revision.number;
    let here = t.attempts.iter().filter(|a| a.revision == n).count();
    let class = t.class.as_ref().map(|c| format!(" · {}", text(c))).unwrap_or_default();
    let _ = write!(
        out,
        "<details class=\"task\" id=\"task-{i}\" data-i=\"{i}\"><summary><code class=\"ref\">{}</code> \
         <span class=\"badge {}\">{}</span>{class} <span class=\"muted\">{} · {} in revision {n}</span></summary><div class=\"body\">",
        text(&t.task_ref),
        state_class("st", &t.state),
        text(&t.state),
        text(&t.title),
        crate::report::count(here, "attempt"),
    );
    let deps = if t.depends_on.is_empty() { "none".to_string() } else { t.depends_on.join(", ") };
    let _ = write!(
        out,
        "<dl><dt>provider</dt><dd>{} (effect {})</dd><dt>depends on</dt><dd>{}</dd><dt>operation</dt><dd><code>{}</code></dd>\
         <dt>request digest</dt><dd><code>{}</code></dd>",
        text(&t.provider),
        text(&t.effect),
        text(&deps),
        text(&t.operation_id),
        text(&t.request_digest)
    );
    if let Some(why) = &t.why {
        let _ = write!(out, "<dt>recorded why</dt><dd>{}</dd>", text(why));
    }
    out.push_str("</dl>");
    reuse(t, out);
    approvals(t, out);
    if t.attempts.is_empty() {
        out.push_str("<p class=\"muted\">No attempt recorded for this task.</p>");
    }
    for a in &t.attempts {
        attempt(a, n, out);
    }
    out.push_str("</div></details>");
}

fn reuse(t: &TaskReport, out: &mut String) {
    let Some(r) = &t.reuse else { return };
    let line = match (&r.provenance, &r.reason) {
        (Some(p), _) => format!(
            "reused: {} (checkpoint {}, evidence {})",
            r.detail,
            clip(&p.checkpoint, 16),
            p.evidence_ids.iter().map(|e| format!("#{e}")).collect::<Vec<_>>().join(", ")
        ),
        (None, Some(reason)) => format!("run again: {reason} — {}", r.detail),
        (None, None) => r.detail.clone(),
    };
    let _ = write!(out, "<p class=\"reuse\"><b>Reuse decision</b> {}</p>", text(&line));
}

fn approvals(t: &TaskReport, out: &mut String) {
    if t.approvals.is_empty() {
        return;
    }
    out.push_str("<table class=\"approvals\"><caption>Approvals (a person's act)</caption><tr><th>#</th><th>by</th><th>at</th><th>note</th><th>operation</th><th>became</th></tr>");
    // An approval names the attempt that used it by its ledger id; the
    // page names it by the task's own numbering.
    let number = |id: i64| t.attempts.iter().find(|x| x.id == id).map_or(id, |x| x.number);
    for a in &t.approvals {
        let became = match (a.consumed_by, a.voided_by) {
            _ if a.store_tampered.is_some() => a.store_tampered.clone().unwrap_or_default(),
            (Some(c), _) => format!("consumed by attempt {}", number(c)),
            (None, Some(v)) => format!("voided by attempt {} (that call needed none)", number(v)),
            _ if a.expired => format!("expired at {} UTC: never spent", time(a.expires_at_ms.unwrap_or_default())),
            _ => match &a.expires_in {
                Some(words) => format!("not used yet ({words})"),
                None => "not used yet".to_string(),
            },
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"note\">{}</td><td><code>{}</code> r{}</td><td>{}</td></tr>",
            a.id,
            text(&a.actor),
            time(a.at_ms),
            text(&a.note),
            text(&a.operation_id),
            a.revision,
            text(&became)
        );
    }
    out.push_str("</table>");
}

fn attempt(a: &AttemptReport, n: i64, out: &mut String) {
    let other = if a.revision == n { "" } else { " other-rev" };
    let _ = write!(
        out,
        "<section class=\"attempt{other}\" data-attempt=\"{}\"><h4>attempt {} · revision {} · try {} · {} · <span class=\"badge {}\">{}</span></h4>",
        a.id,
        a.number,
        a.revision,
        a.try_no,
        text(&a.kind),
        state_class("as", &a.state),
        text(&a.state)
    );
    times(a, out);
    if let Some(i) = &a.instruction {
        let _ = write!(out, "<p>repair instruction: <q>{}</q></p>", text(i));
    }
    if let Some(c) = &a.classification {
        let ids: Vec<String> = c.evidence_ids.iter().map(|e| format!("#{e}")).collect();
        let _ = write!(
            out,
            "<p class=\"class\">classified <b>{}</b> by rule <code>{}</code> from evidence {}</p>",
            text(&c.class),
            text(&c.rule),
            text(&ids.join(", "))
        );
    }
    for e in &a.evidence {
        evidence(e, out);
    }
    claims(a, out);
    if let Some(t) = a.settlement.as_ref().and_then(|s| s.store_tampered.as_ref()) {
        let _ = write!(out, "<p class=\"tampered\"><b>not a settlement</b>: {}</p>", text(t));
    } else if let Some(s) = &a.settlement {
        let _ = write!(
            out,
            "<p class=\"settled\"><b>settled {}</b> by {} at {}: <q>{}</q> — a person's word, not verified by the engine</p>",
            text(&s.outcome),
            text(&s.actor),
            time(s.at_ms),
            text(&s.note)
        );
    }
    out.push_str("</section>");
}

fn times(a: &AttemptReport, out: &mut String) {
    let mut parts = vec![format!("intent {}", time(a.intent_at_ms))];
    if let Some(d) = a.dispatched_at_ms {
        let detail = a.dispatch_detail.as_deref().map(|d| format!(" ({})", text(d))).unwrap_or_default();
        parts.push(format!("handed to the provider {}{detail}", time(d)));
    }
    if let Some(h) = &a.handle {
        let at = a.handle_at_ms.map(|t| format!(" {}", time(t))).unwrap_or_default();
        parts.push(format!("accepted by the provider as {}{at}", text(&crate::evidence::handle_words(h))));
    }
    match a.receipt_at_ms {
        Some(r) => parts.push(format!("receipt {}", time(r))),
        None => parts.push("<b>no receipt</b>".to_string()),
    }
    if let Some(f) = a.finished_at_ms {
        parts.push(format!("finished {} ({})", time(f), duration(f - a.intent_at_ms)));
    }
    let _ = write!(out, "<p class=\"times\">{}</p>", parts.join(" · "));
    if let Some(r) = &a.unknown_reason {
        let _ = write!(out, "<p class=\"warn\">outcome unknown: {}</p>", text(r));
    }
}

fn claims(a: &AttemptReport, out: &mut String) {
    if a.claims.is_empty() {
        return;
    }
    out.push_str("<div class=\"claims\"><h5>Claims — not verified (kept apart; never a cause or a verdict)</h5>");
    for c in &a.claims {
        let _ = write!(
            out,
            "<p>claim #{} [{}] <span class=\"unverified\">not verified</span></p><pre class=\"out\">{}</pre>",
            c.id,
            text(&c.authority),
            text(&clip(&c.data.to_string(), CLAIM_CHARS_MAX))
        );
    }
    out.push_str("</div>");
}

/// A re-observation's verdict and summary (a read-back's request, answer
/// and deciding rule).
fn observation_head(o: &providers::Observation) -> String {
    match o {
        providers::Observation::EffectPresent { evidence } => format!("observed present: {evidence}"),
        providers::Observation::EffectAbsent { evidence } => format!("observed absent: {evidence}"),
        providers::Observation::Inconclusive { evidence } => format!("inconclusive: {evidence}"),
    }
}

fn evidence(e: &EvidenceItem, out: &mut String) {
    let (head, outputs) = head_and_outputs(&e.evidence);
    let _ = write!(
        out,
        "<div class=\"ev\"><p><span class=\"evid\">evidence #{} {}</span> {} <span class=\"muted\">at {}</span></p>",
        e.id,
        text(e.evidence.kind()),
        text(&head),
        time(e.at_ms)
    );
    for (name, o) in outputs {
        output(name, o, out);
    }
    out.push_str("</div>");
}

/// A piece of evidence in one line, and the outputs it holds, by name.
fn head_and_outputs(evidence: &Evidence) -> (String, Vec<(&str, &Output)>) {
    match evidence {
        Evidence::ProcessExit { exit, timed_out, duration_ms, stdout, stderr } => (
            format!(
                "provider process exit {} in {}{}",
                exit_text(exit),
                duration(*duration_ms as i64),
                if *timed_out { " (engine deadline hit; process group killed)" } else { "" }
            ),
            vec![("stdout", stdout), ("stderr", stderr)],
        ),
        Evidence::BuiltinResult { op, timed_out, duration_ms } => {
            (crate::report::explain::builtin_text(op, *timed_out, *duration_ms), Vec::new())
        }
        Evidence::DescendantsEnded { processes, grace_ms, ended } => {
            (crate::evidence::descendants_text(processes, *grace_ms, *ended), Vec::new())
        }
        Evidence::HttpResponse { status, body, duration_ms, body_cut } => {
            (format!("HTTP {status} in {}{}", duration(*duration_ms as i64), cut_short(body_cut)), vec![("body", body)])
        }
        Evidence::ToolResult { is_error, body, stderr, duration_ms } => (
            format!(
                "MCP tool answered{} in {}",
                if *is_error { " with an error" } else { "" },
                duration(*duration_ms as i64)
            ),
            vec![("result", body), ("server stderr", stderr)],
        ),
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
            let h = check_head(
                (check_id, *of_constraint, *passed),
                (exit, *expect_exit, *timed_out),
                (checkpoint, failing_assertion),
            );
            (h, vec![("stdout", stdout), ("stderr", stderr)])
        }
        Evidence::ProtectedPathChanged { changes } => (crate::report::explain::protected_changes(changes), Vec::new()),
        Evidence::UndeclaredWrite { changes, more, outputs } => {
            (crate::report::explain::undeclared_writes(changes, *more, outputs.as_deref()), Vec::new())
        }
        Evidence::SpendingReported { items, total_micros, may_spend } => {
            (crate::report::explain::spending_words(items, *total_micros, *may_spend), Vec::new())
        }
        Evidence::Observation { observation, read_back } => (
            observation_head(observation),
            read_back.iter().filter_map(|r| r.answer.as_ref()).map(|o| ("answer", o)).collect(),
        ),
        Evidence::HandleLookup { handle, found, evidence } => (
            format!(
                "asked the provider about {}: {} — {evidence}",
                crate::evidence::handle_words(handle),
                found.as_str()
            ),
            Vec::new(),
        ),
        other => (crate::report::words::sentence(other).unwrap_or_else(|| other.kind().replace('_', " ")), Vec::new()),
    }
}

/// A check's result in one line: which check, its verdict, its exit
/// against the expected one, the checkpoint it ran against, the failing
/// assertion.
fn check_head(
    (check_id, of_constraint, passed): (&str, bool, bool),
    (exit, expect_exit, timed_out): (&Option<providers::ExitStatus>, i32, bool),
    (checkpoint, failing_assertion): (&Option<String>, &Option<String>),
) -> String {
    let mut h = format!(
        "{} {check_id}: {} (exit {}, expected {expect_exit}{})",
        if of_constraint { "constraint check" } else { "check" },
        if passed { "passed" } else { "FAILED" },
        exit_text(exit),
        if timed_out { ", deadline hit" } else { "" }
    );
    if let Some(cp) = checkpoint {
        h.push_str(&format!(" against checkpoint {}", clip(cp, 16)));
    }
    if let Some(a) = failing_assertion {
        h.push_str(&format!("; failing assertion: {a}"));
    }
    h
}

fn output(name: &str, o: &Output, out: &mut String) {
    if o.total_bytes == 0 && o.excerpt.is_empty() {
        return;
    }
    let cut = if o.truncated { format!(", capture truncated to {} bytes", o.kept_bytes) } else { String::new() };
    let _ = write!(
        out,
        "<p class=\"outname\">{name}: {} bytes{cut} (last lines below; blob <code>{}</code>)</p><pre class=\"out\">{}</pre>",
        o.total_bytes,
        text(&clip(&o.blob, 16)),
        text(&clip(&o.excerpt, EXCERPT_CHARS_MAX))
    );
}

fn exit_text(exit: &Option<providers::ExitStatus>) -> String {
    match exit {
        Some(providers::ExitStatus::Code { code }) => format!("code {code}"),
        Some(providers::ExitStatus::Signal { signal }) => format!("signal {signal}"),
        None => "unknown".into(),
    }
}

/// Why an HTTP answer's body may not be whole, as a clause (or nothing).
fn cut_short(body_cut: &Option<String>) -> String {
    body_cut.as_deref().map(|c| format!("; the body was cut short: {c}")).unwrap_or_default()
}
