//! What `engine revise` prints: the revision, why, each task's reuse
//! decision, and the run that followed (unless `--no-run`).

use serde_json::json;

use super::escape::for_terminal;
use super::Output;
use crate::commands::revise::{ReviseReport, TaskDecision};
use crate::decide::reuse::Decision;
use crate::store::LedgerRead;

/// `ledger`: to number a reused attempt as its task counts it.
pub fn render(r: &ReviseReport, ledger: &dyn LedgerRead) -> Output {
    let mut text = if r.revision == r.from_revision {
        format!("goal {}: no new revision (the plan is the same as revision {})\n", r.goal_id, r.revision)
    } else {
        format!(
            "goal {}: revision {} recorded (from {}){}\n",
            r.goal_id,
            r.revision,
            r.from_revision,
            if r.goal_contract_changed { "; the goal contract changed" } else { "" },
        )
    };
    text.push_str(&format!("reason: {}\n", for_terminal(&r.reason)));
    for raised in &r.raised {
        text.push_str(&format!(
            "budget raised by {}: {} {} -> {}\n",
            for_terminal(&r.person.actor),
            raised.budget,
            raised.from,
            raised.to
        ));
    }
    if !r.loosened.is_empty() {
        text.push_str(&format!("loosened, approved by {}:\n", for_terminal(&r.person.actor)));
        for l in &r.loosened {
            text.push_str(&format!("  - {}\n", for_terminal(&l.line())));
        }
    }
    if !r.decisions.is_empty() {
        text.push_str(&decisions_table(&r.decisions, ledger));
    }
    let exit_code = match &r.run {
        Some(run) => {
            let out = super::run::render(run);
            text.push('\n');
            text.push_str(&out.text);
            out.exit_code
        }
        None => {
            text.push_str(&format!("not run (--no-run): `engine run {}` runs this revision\n", r.plan_path));
            0
        }
    };
    Output { text, json: json!(r), exit_code }
}

/// A reuse on condition (early cutoff), in words: what the run checks.
fn on_condition(upstreams: &[String]) -> String {
    crate::decide::reuse::cutoff::condition_words(upstreams).map(|w| format!("; {w}")).unwrap_or_default()
}

/// Text table of decisions, for `revise`.
pub fn decisions_table(decisions: &[TaskDecision], ledger: &dyn LedgerRead) -> String {
    let width = decisions.iter().map(|d| d.task_ref.len()).max().unwrap_or(4).max(4);
    let mut text = format!("  {}  {:<6}  {:<24}  {}\n", super::pad("TASK", width), "DECIDE", "REASON", "DETAIL");
    for d in decisions {
        match &d.decision {
            Decision::Reuse { provenance } => text.push_str(&format!(
                "  {}  {:<6}  {:<24}  from revision {} {}{}{}\n",
                super::pad(&d.task_ref, width),
                "reuse",
                "-",
                provenance.revision,
                super::explain::attempt_words(ledger, Some(provenance.attempt_id.get())),
                super::words::evidence_clause(&provenance.evidence_ids),
                on_condition(&d.early_cutoff_on)
            )),
            Decision::Run { refusal } => text.push_str(&format!(
                "  {}  {:<6}  {:<24}  {}\n",
                super::pad(&d.task_ref, width),
                "run",
                refusal.code(),
                refusal.detail()
            )),
        }
    }
    text
}
