//! The checks of what the rows hold: every JSON column and blob, and the
//! stored plans against their digests.

use serde_json::Value;

use super::ctx::{col, found, Ctx, Finding};
use crate::error::Result;

/// (table, key expression, JSON column)
const JSON_COLUMNS: &[(&str, &str, &str)] = &[
    ("revisions", "goal_id || ' r' || revision", "plan_json"),
    ("tasks", "goal_id || ' r' || revision || ' ' || task_ref", "detail"),
    ("attempts", "id", "request_json"),
    ("attempts", "id", "class_evidence_ids"),
    ("attempts", "id", "class_claim_ids"),
    ("attempts", "id", "process"),
    ("receipts", "attempt_id", "data"),
    ("claims", "id", "data"),
    ("events", "seq", "data"),
    ("checkpoints", "digest", "data"),
];

pub(super) fn json_columns(ctx: &mut Ctx) -> Result<Option<Finding>> {
    for (table, key, column) in JSON_COLUMNS {
        for r in ctx.rows(&format!("SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL"))? {
            if let Err(e) = serde_json::from_str::<Value>(&col(&r, 1).text()) {
                return Ok(found(format!("{table} {}", col(&r, 0).text()), format!("`{column}` is not JSON: {e}")));
            }
        }
    }
    // What an attempt's sandbox record holds is read back whole by every
    // command that shows the attempt: checked as that, not as any JSON.
    for r in ctx.rows("SELECT id, sandbox FROM attempts WHERE sandbox IS NOT NULL ORDER BY id")? {
        if let Err(e) = serde_json::from_str::<providers::sandbox::Record>(&col(&r, 1).text()) {
            return Ok(found(
                format!("attempts {}", col(&r, 0).text()),
                format!("`sandbox` is not a sandbox record: {e}"),
            ));
        }
    }
    for r in ctx.rows("SELECT id, data FROM evidence ORDER BY id")? {
        if let Err(e) = serde_json::from_str::<crate::evidence::Evidence>(&col(&r, 1).text()) {
            return Ok(found(format!("evidence {}", col(&r, 0).text()), format!("does not parse as evidence: {e}")));
        }
    }
    // A checkpoint that does not parse as one, or names another digest than
    // its row's, is absent to reuse (`RecordedCheckpoint::from_json`): a
    // run would judge its task's completion without it.
    for r in ctx.rows("SELECT digest, data FROM checkpoints ORDER BY digest")? {
        let digest = col(&r, 0).text();
        let why = match serde_json::from_str::<crate::checkpoint::Checkpoint>(&col(&r, 1).text()) {
            Err(e) => format!("does not parse as a checkpoint: {e}"),
            Ok(cp) if cp.digest != digest => format!("names the digest {}", cp.digest),
            Ok(_) => continue,
        };
        return Ok(found(format!("checkpoint {digest}"), why));
    }
    Ok(None)
}

pub(super) fn blobs_addressed(ctx: &mut Ctx) -> Result<Option<Finding>> {
    for r in ctx.rows("SELECT digest, size, data FROM blobs ORDER BY digest")? {
        let (digest, size, data) = (col(&r, 0).text(), col(&r, 1).int()?, col(&r, 2).bytes()?);
        if size != data.len() as i64 {
            return Ok(found(format!("blob {digest}"), format!("records {size} bytes but holds {}", data.len())));
        }
        let actual = crate::digest::content(data);
        if actual != digest {
            return Ok(found(format!("blob {digest}"), format!("its bytes hash to {actual}")));
        }
    }
    Ok(None)
}

pub(super) fn plan_digests(ctx: &mut Ctx) -> Result<Option<Finding>> {
    let recorded = ctx.rows("SELECT goal_id, revision, plan_digest, goal_contract FROM revisions")?;
    if let Some(f) = ctx.load_plans()? {
        return Ok(Some(f));
    }
    for r in recorded {
        let (goal, revision) = (col(&r, 0).text(), col(&r, 1).int()?);
        let (plan_digest, goal_contract) = (col(&r, 2).text(), col(&r, 3).text());
        let entry = format!("goal {goal} revision {revision}");
        let Some(file) = ctx.plans.get(&(goal.clone(), revision)) else { continue };
        let mut file = file.clone();
        if let Err(e) = crate::plan::validate::validate_structure(&file) {
            return Ok(found(entry, format!("stored plan is not a valid plan: {e}")));
        }
        for task in &mut file.tasks {
            crate::digest::sort_keys(&mut task.action);
        }
        let digests = crate::plan::PlanDigests::compute(&file);
        if digests.plan != plan_digest {
            return Ok(found(entry, format!("stored plan digests to {}, recorded {plan_digest}", digests.plan)));
        }
        if digests.goal_contract != goal_contract {
            return Ok(found(entry, "stored plan's goal contract digest differs from the recorded one"));
        }
        if file.goal.as_ref().is_some_and(|g| g.id != goal) {
            return Ok(found(entry, "stored plan names another goal"));
        }
    }
    Ok(None)
}
