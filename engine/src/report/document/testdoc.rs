//! Documents built in tests (no ledger), for the pure parts of the report.

use crate::evidence::{Evidence, Output};
use crate::report::document::*;

pub fn output(excerpt: &str) -> Output {
    Output {
        blob: "b".repeat(64),
        excerpt: excerpt.into(),
        total_bytes: excerpt.len() as u64,
        kept_bytes: excerpt.len() as u64,
        truncated: false,
        omitted: None,
    }
}

pub fn attempt(id: i64, state: &str, stdout: &str) -> AttemptReport {
    AttemptReport {
        id,
        number: id,
        revision: 1,
        try_no: 1,
        kind: "run".into(),
        state: state.into(),
        operation_id: format!("op_{id:024}"),
        request_digest: "d".repeat(64),
        effect: "local".into(),
        cost: 0.0,
        intent_at_ms: 1_000 * id,
        dispatched_at_ms: Some(1_000 * id + 5),
        receipt_at_ms: Some(1_000 * id + 400),
        finished_at_ms: Some(1_000 * id + 600),
        dispatch_detail: Some("pid 42".into()),
        handle: None,
        handle_at_ms: None,
        unknown_reason: None,
        instruction: None,
        classification: None,
        evidence: vec![EvidenceItem {
            id: id * 10,
            at_ms: 1_000 * id + 400,
            evidence: Evidence::ProcessExit {
                exit: None,
                timed_out: false,
                duration_ms: 395,
                stdout: output(stdout),
                stderr: output(""),
            },
        }],
        claims: Vec::new(),
        settlement: None,
    }
}

pub fn task(task_ref: &str, deps: &[&str], state: &str, attempts: Vec<AttemptReport>) -> TaskReport {
    TaskReport {
        task_ref: task_ref.into(),
        title: format!("do {task_ref}"),
        provider: "sh".into(),
        effect: "local".into(),
        cost: crate::cost::Cost::ZERO,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        state: state.into(),
        class: None,
        why: None,
        upstream: None,
        operation_id: "op_1".into(),
        request_digest: "d".repeat(64),
        reuse: None,
        attempts,
        approvals: Vec::new(),
    }
}

pub fn doc(tasks: Vec<TaskReport>) -> ReportDocument {
    let attempts: Vec<AttemptReport> = tasks.iter().flat_map(|t| t.attempts.clone()).collect();
    let (claims, does_not_claim) = words::goal_words("open", 0, &[], false, &[]);
    ReportDocument {
        format: FORMAT.into(),
        engine_version: "test".into(),
        generated_at: None,
        goal: GoalSection {
            id: "g".into(),
            statement: "a goal".into(),
            state: "open".into(),
            claims,
            does_not_claim,
            active_revision: 1,
            first_run_at_ms: 0,
            acceptance: Vec::new(),
            constraints: Vec::new(),
            revisions: Vec::new(),
        },
        revision: RevisionSection {
            number: 1,
            active: true,
            plan_path: "plan.json".into(),
            plan_digest: "p".into(),
            goal_contract_digest: "c".into(),
            reason: None,
            runs: Vec::new(),
        },
        budgets: Budgets {
            provider_calls: Used { used: 1, limit: 100 },
            cost: Used { used: 0.0, limit: 0.0 },
            attempts_per_task: Used { used: 1, limit: 3 },
            revisions: Used { used: 0, limit: 3 },
            deadline: Deadline {
                limit_seconds: 60,
                last_run_at_ms: Some(0),
                ends_at_ms: Some(60_000),
                last_activity_at_ms: None,
            },
        },
        tasks,
        waiting: Vec::new(),
        timeline: timeline::timeline(attempts.iter(), Vec::new()),
        store_tampered: Vec::new(),
    }
}
