//! The top of the page — the goal, its state in the engine's words, the
//! acceptance checks, constraints, budgets — what waits on a person, and
//! the legend at the foot. Pure.

use std::fmt::Write;

use super::escape::{attr, text};
use super::{state_class, time};
use crate::decide::advice::shell_word;
use crate::evidence::Evidence;
use crate::report::document::{words::TASK_STATES, ReportDocument};

pub fn header(doc: &ReportDocument, out: &mut String) {
    let g = &doc.goal;
    let r = &doc.revision;
    let _ = write!(
        out,
        "<header><h1>Goal <code>{}</code> <span class=\"badge {}\">{}</span></h1><p class=\"statement\">{}</p>\
         <p class=\"claims\"><b>The state claims:</b> {}.<br><b>It does not claim:</b> {}.</p>",
        text(&g.id),
        state_class("gs", &g.state),
        text(&g.state),
        text(&g.statement),
        text(&g.claims),
        text(&g.does_not_claim)
    );
    let which = if r.active {
        "the active revision".to_string()
    } else {
        format!("not the active one (that is {}): nothing more runs for it", g.active_revision)
    };
    let generated = match &doc.generated_at {
        Some(t) => format!("generated at {}", text(t)),
        None => "no generation time (--no-timestamp)".to_string(),
    };
    let _ = write!(
        out,
        "<p class=\"meta\">revision {} of {} — {which} · plan <code>{}</code> · plan digest <code>{}</code> · {generated}</p></header>",
        r.number,
        g.active_revision,
        text(&r.plan_path),
        text(&r.plan_digest)
    );
    revisions(doc, out);
}

/// Acceptance checks, constraints and budgets.
pub fn goal_tables(doc: &ReportDocument, out: &mut String) {
    acceptance(doc, out);
    constraints(doc, out);
    budgets(doc, out);
}

fn revisions(doc: &ReportDocument, out: &mut String) {
    if doc.goal.revisions.len() < 2 {
        return;
    }
    out.push_str("<details class=\"revisions\"><summary>Revisions</summary><ul>");
    for r in &doc.goal.revisions {
        let _ = write!(
            out,
            "<li>revision {}{}: {}</li>",
            r.revision,
            r.parent.map(|p| format!(" (from {p})")).unwrap_or_default(),
            text(r.reason.as_deref().unwrap_or("first run"))
        );
    }
    out.push_str("</ul></details>");
}

fn acceptance(doc: &ReportDocument, out: &mut String) {
    out.push_str("<section id=\"acceptance\"><h2>Acceptance</h2>");
    if doc.goal.acceptance.is_empty() {
        out.push_str("<p>The goal has no acceptance criterion: nothing checks the goal itself.</p></section>");
        return;
    }
    out.push_str("<table><tr><th>id</th><th>criterion</th><th>check</th><th>latest result</th></tr>");
    for a in &doc.goal.acceptance {
        let check = match &a.check {
            Some(argv) => format!(
                "<code>{}</code> expects exit {}",
                text(&argv.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")),
                a.expect_exit.unwrap_or(0)
            ),
            None => "<i>no check: not verified by the engine</i>".to_string(),
        };
        let mut result = format!("<span class=\"badge {}\">{}</span>", state_class("ac", &a.result), text(&a.result));
        if let Some(e) = &a.evidence {
            if let Evidence::CheckResult { failing_assertion, stdout, stderr, .. } = &e.evidence {
                let _ = write!(result, " <span class=\"muted\">evidence #{} at {}</span>", e.id, time(e.at_ms));
                if let Some(f) = failing_assertion {
                    let _ = write!(result, "<br>failing assertion: {}", text(f));
                }
                for o in [stdout, stderr].into_iter().filter(|o| !o.excerpt.is_empty()) {
                    let _ = write!(result, "<pre class=\"out\">{}</pre>", text(&o.excerpt));
                }
            }
        }
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{check}</td><td>{result}</td></tr>",
            text(&a.id),
            text(&a.statement)
        );
    }
    out.push_str("</table></section>");
}

fn constraints(doc: &ReportDocument, out: &mut String) {
    if doc.goal.constraints.is_empty() {
        return;
    }
    out.push_str("<section id=\"constraints\"><h2>Constraints</h2><ul>");
    for c in &doc.goal.constraints {
        let Some(id) = c.id.as_deref().filter(|_| c.checked_by_engine) else {
            let _ = write!(
                out,
                "<li>{} <span class=\"unverified\">not checked by the engine</span></li>",
                text(&c.statement)
            );
            continue;
        };
        let mut how = Vec::new();
        if !c.protect.is_empty() {
            how.push(format!("no attempt may change <code>{}</code>", text(&c.protect.join(", "))));
        }
        if let Some(run) = &c.check {
            how.push(format!("check <code>{}</code> after every attempt's validations", text(&run.join(" "))));
        }
        let _ = write!(
            out,
            "<li><code>{}</code> {} <span>checked by the engine: {}</span></li>",
            text(id),
            text(&c.statement),
            how.join("; ")
        );
    }
    out.push_str("</ul></section>");
}

fn budgets(doc: &ReportDocument, out: &mut String) {
    let b = &doc.budgets;
    let d = &b.deadline;
    let last = match (d.last_run_at_ms, d.ends_at_ms) {
        (Some(began), Some(ends)) => format!("; the last run began at {} (its deadline: {})", time(began), time(ends)),
        _ => String::new(),
    };
    let _ = write!(
        out,
        "<section id=\"budgets\"><h2>Budgets used</h2><table>\
         <tr><td>provider calls (goal-wide)</td><td>{} of {}</td></tr>\
         <tr><td>cost (goal-wide)</td><td>{} of {}</td></tr>\
         <tr><td>attempts of one task (most, this revision)</td><td>{} of {}</td></tr>\
         <tr><td>revisions after the first</td><td>{} of {}</td></tr>\
         <tr><td>deadline</td><td>{} s per run, from the start of each run, repair, retry or revise{last}</td></tr></table></section>",
        b.provider_calls.used,
        b.provider_calls.limit,
        b.cost.used,
        b.cost.limit,
        b.attempts_per_task.used,
        b.attempts_per_task.limit,
        b.revisions.used,
        b.revisions.limit,
        d.limit_seconds,
    );
}

/// The act rows the act chain does not vouch for, before anything else a
/// person reads: none of them is an act.
pub fn tampered(doc: &ReportDocument, out: &mut String) {
    if doc.store_tampered.is_empty() {
        return;
    }
    out.push_str("<section id=\"tampered\" class=\"tampered\"><h2>Rows not written by the engine</h2><ul>");
    for t in &doc.store_tampered {
        let _ = write!(out, "<li>{}</li>", text(&t.words));
    }
    out.push_str("</ul></section>");
}

pub fn waiting(doc: &ReportDocument, out: &mut String) {
    out.push_str("<section id=\"waiting\"><h2>Waiting on a person</h2>");
    if doc.waiting.is_empty() {
        out.push_str("<p>Nothing in this report waits on a person.</p></section>");
        return;
    }
    out.push_str("<ul class=\"waiting\">");
    for w in &doc.waiting {
        let link = match doc.tasks.iter().position(|t| t.task_ref == w.task_ref) {
            Some(i) => format!(
                "<a href=\"#task-{i}\" data-i=\"{i}\" class=\"tasklink\"><code>{}</code></a>",
                text(&w.task_ref)
            ),
            None => format!("<code>{}</code>", text(&w.task_ref)),
        };
        let op = w.operation_id.as_deref().map(|o| format!(" operation <code>{}</code>", text(o))).unwrap_or_default();
        let tr = w.try_no.map(|t| format!(" try {t}")).unwrap_or_default();
        let tr = match w.cost {
            Some(c) => format!("{tr} (cost {c})"),
            None => tr,
        };
        let _ = write!(
            out,
            "<li class=\"{}\"><b>{}</b> task {link}{op}{tr}: {}",
            state_class("wk", &w.kind),
            text(&w.kind),
            text(&w.why)
        );
        for c in &w.commands {
            let _ = write!(out, "<div class=\"cmd\"><code>{}</code><button type=\"button\" class=\"copy\" data-copy=\"{}\">copy</button></div>", text(c), attr(c));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></section>");
}

pub fn footer(doc: &ReportDocument, out: &mut String) {
    out.push_str("<footer><h2>What each task state claims</h2><ul class=\"legend\">");
    for (state, claims) in TASK_STATES {
        let _ =
            write!(out, "<li><span class=\"badge {}\">{state}</span> {}</li>", state_class("st", state), text(claims));
    }
    let _ = write!(
        out,
        "</ul><p class=\"muted\">Everything above is text from the ledger, escaped; a control character a \
         provider printed shows as <span class=\"ctl\">\\x1b</span>. {} · report format {}</p></footer>",
        text(&doc.engine_version),
        text(&doc.format)
    );
}
