//! `engine repair REF`: a new attempt of a failed task in the same plan
//! revision, with the failure evidence handed to its provider. Repair is
//! for fixing one task; changing the goal or the plan is `engine revise`.
//!
//! Refused when it would only repeat: the last two failures share a
//! fingerprint (class + evidence digest) and neither the task's inputs nor
//! the instruction changed since.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::checkpoint;
use crate::digest::{Digester, Kind};
use crate::error::{Code, Error, Result};
use crate::evidence::Recorded;
use crate::plan::{digests, Plan, PlanFile};
use crate::report::status::goal_or_latest;
use crate::run::{self, Repair, RunReport};
use crate::state::{AttemptState, FailureClass, TaskState};
use crate::store::events::{self, Event};
use crate::store::{ledger, Durability, Store};

pub struct RepairRequest {
    pub goal: Option<String>,
    pub task_ref: String,
    pub instruction: Option<String>,
    /// A provider named on the command line; only the plan's is allowed.
    pub provider: Option<String>,
    /// `--force --note TEXT`: a person's reason to repair a failure whose
    /// class does not suggest repair.
    pub force_note: Option<String>,
    pub jobs: usize,
}

/// The fingerprint of a failure: its class and a digest of its evidence,
/// leaving out what varies between identical failures (ids, durations).
pub fn fingerprint(class: &str, evidence: &[Recorded]) -> String {
    let mut list: Vec<Value> =
        evidence.iter().map(|r| serde_json::to_value(&r.evidence).expect("serializes")).collect();
    for v in &mut list {
        strip_volatile(v);
    }
    Digester::new(Kind::FailureFingerprint).str("class", class).json("evidence", &Value::Array(list)).finish()
}

fn strip_volatile(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("duration_ms");
            map.remove("checkpoint");
            // Output is compared by its shape, not its timings and counters:
            // the blob (exact bytes) goes, the excerpt keeps its words.
            map.remove("blob");
            map.remove("total_bytes");
            map.remove("kept_bytes");
            if let Some(Value::String(text)) = map.get_mut("excerpt") {
                *text = mask_digits(text);
            }
            map.values_mut().for_each(strip_volatile);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_volatile),
        _ => {}
    }
}

/// `Ran 3 tests in 0.001s` → `Ran # tests in #.#s`.
fn mask_digits(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

/// Would this repair only repeat the last failure? Pure: the caller reads
/// the ledger and observes the inputs.
pub fn is_repetition(
    last_two_fingerprints: Option<(&str, &str)>,
    inputs_then: Option<&str>,
    inputs_now: Option<&str>,
    instruction_then: Option<&str>,
    instruction_now: Option<&str>,
) -> bool {
    match last_two_fingerprints {
        Some((a, b)) if a == b => inputs_then == inputs_now && instruction_then == instruction_now,
        _ => false,
    }
}

pub fn repair(store: &mut Store, req: RepairRequest) -> Result<RunReport> {
    crate::run::orphans::take_lease(store)?;
    let result = repair_locked(store, req);
    let _ = store.release_lease();
    result
}

/// The evidence a failure's classification rests on (its `evidence_ids`),
/// or all of the attempt's evidence when the class names none. What else
/// the attempt produced (an agent's chatter, a passing check) is not the
/// failure, and must not make two identical failures look different.
fn failure_evidence(a: &ledger::AttemptRow, all: Vec<Recorded>) -> Vec<Recorded> {
    let ids: Vec<i64> = a
        .classification
        .as_ref()
        .and_then(|c| c.get("evidence_ids"))
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        return all;
    }
    all.into_iter().filter(|r| ids.contains(&r.id)).collect()
}

fn class_of(a: &ledger::AttemptRow) -> Option<FailureClass> {
    a.classification.as_ref().and_then(|c| c.get("class")).and_then(Value::as_str).and_then(FailureClass::parse)
}

fn repair_locked(store: &mut Store, req: RepairRequest) -> Result<RunReport> {
    let conn = store.conn();
    let g = goal_or_latest(store, req.goal.as_deref())?;
    let row = ledger::revision(conn, &g.id, g.active_revision)?;
    let file: PlanFile = serde_json::from_str(&row.plan_json)
        .map_err(|e| Error::new(Code::StoreCorrupt, format!("stored plan does not parse: {e}")))?;
    let plan = Plan::from_file(file, PathBuf::from(&row.workspace))?;
    let task = plan.task(&req.task_ref).cloned().ok_or_else(|| {
        Error::usage(format!("goal `{}` revision {} has no task `{}`", g.id, g.active_revision, req.task_ref))
            .at(req.task_ref.clone())
    })?;
    if let Some(p) = &req.provider {
        if *p != task.provider {
            return Err(Error::new(
                Code::ProviderChangeRequiresRevision,
                format!(
                    "task {} is done by provider `{}`; switching to `{p}` changes the plan: use `engine revise`",
                    task.task_ref, task.provider
                ),
            )
            .at(task.task_ref.clone()));
        }
    }
    let attempts: Vec<ledger::AttemptRow> = ledger::attempts_of_task(conn, &g.id, &task.task_ref)?
        .into_iter()
        .filter(|a| a.revision == g.active_revision && a.state != AttemptState::Abandoned)
        .collect();
    let last = attempts
        .last()
        .filter(|a| a.state == AttemptState::Failed)
        .ok_or_else(|| {
            let state =
                attempts.last().map_or("no attempt".to_string(), |a| format!("its latest attempt is `{}`", a.state));
            Error::usage(format!("task {} has not failed ({state}): repair is for a failed task", task.task_ref))
                .at(task.task_ref.clone())
        })?
        .clone();
    let class = class_of(&last).unwrap_or(FailureClass::Unclassified);
    if matches!(class, FailureClass::ProviderRejected | FailureClass::Unclassified)
        && req.force_note.as_deref().is_none_or(|n| n.trim().is_empty())
    {
        return Err(Error::usage(format!(
            "task {} failed as `{class}`, which a repair is not expected to fix (next: {}); to repair anyway pass --force --note TEXT",
            task.task_ref,
            class.next_step()
        ))
        .at(task.task_ref.clone()));
    }

    // Repetition: the last two failures alike, and nothing new since.
    let failed: Vec<&ledger::AttemptRow> = attempts.iter().filter(|a| a.state == AttemptState::Failed).collect();
    let fps: Vec<String> = failed
        .iter()
        .rev()
        .take(2)
        .map(|a| {
            Ok(fingerprint(
                class_of(a).map_or("unclassified", FailureClass::as_str),
                &failure_evidence(a, ledger::evidence_of_attempt(conn, a.id)?),
            ))
        })
        .collect::<Result<_>>()?;
    let mut cache = checkpoint::FileCache::load(conn)?;
    let inputs_now = checkpoint::observe(&plan.workspace, &task, &plan.file.secrets, &mut cache).ok().map(|c| c.digest);
    let inputs_then = last.checkpoint.clone().or_else(|| last.inputs_at_intent.clone());
    let pair = if fps.len() == 2 { Some((fps[0].as_str(), fps[1].as_str())) } else { None };
    if is_repetition(
        pair,
        inputs_then.as_deref(),
        inputs_now.as_deref(),
        last.instruction.as_deref(),
        req.instruction.as_deref(),
    ) {
        return Err(Error::new(
            Code::RepeatedFailureWithoutNewEvidence,
            format!(
                "task {}'s last two failures are the same ({class}, fingerprint {}) and neither its inputs nor the instruction changed since; change something (inputs, --instruction) or revise the plan",
                task.task_ref,
                &fps[0][..16]
            ),
        )
        .at(task.task_ref.clone())
        .with_details(json!({"fingerprint": fps[0], "attempts": failed.iter().rev().take(2).map(|a| a.id).collect::<Vec<_>>()})));
    }

    let spec = plan.provider_of(&task);
    let request_digest = digests::request_digest(&task.provider, spec, &task.action, req.instruction.as_deref());
    let operation_id = digests::operation_id(&g.id, &task.task_ref, &request_digest);
    let evidence = ledger::evidence_of_attempt(conn, last.id)?;
    let rep = Repair {
        operation_id: operation_id.clone(),
        request_digest,
        instruction: req.instruction.clone(),
        failed_attempt: last.id,
        classification: last.classification.clone().unwrap_or(Value::Null),
        evidence: json!(evidence.iter().map(|r| json!({"id": r.id, "evidence": r.evidence})).collect::<Vec<_>>()),
    };
    let (goal_id, revision, task_ref) = (g.id.clone(), g.active_revision, task.task_ref.clone());
    store.write(Durability::Normal, |tx| {
        ledger::set_task_state(tx, &goal_id, revision, &task_ref, TaskState::Pending, &json!({"repair_of": last.id}))?;
        events::append(
            tx,
            &Event::goal(
                "repair_requested",
                &goal_id,
                revision,
                json!({
                    "failed_attempt": last.id, "class": class, "instruction": req.instruction,
                    "forced": req.force_note, "operation_id": operation_id,
                }),
            )
            .task(&task_ref),
        )?;
        Ok(())
    })?;
    run::execute_with(store, plan, revision, req.jobs, HashSet::new(), HashMap::from([(task_ref, rep)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetition_needs_same_fingerprint_inputs_and_instruction() {
        let same = Some(("f", "f"));
        assert!(is_repetition(same, Some("c"), Some("c"), None, None));
        assert!(!is_repetition(Some(("f", "g")), Some("c"), Some("c"), None, None), "different failures");
        assert!(!is_repetition(None, Some("c"), Some("c"), None, None), "only one failure so far");
        assert!(!is_repetition(same, Some("c"), Some("d"), None, None), "inputs changed");
        assert!(!is_repetition(same, Some("c"), Some("c"), None, Some("try cents()")), "new instruction");
        assert!(is_repetition(same, Some("c"), Some("c"), Some("x"), Some("x")), "same instruction again");
    }

    #[test]
    fn fingerprint_ignores_durations_but_not_outputs() {
        use crate::evidence::{Evidence, Output};
        let out = |t: &str| Output {
            blob: t.into(),
            excerpt: t.into(),
            total_bytes: 1,
            kept_bytes: 1,
            truncated: false,
            omitted: None,
        };
        let e = |ms, text: &str| {
            vec![Recorded {
                id: ms as i64,
                evidence: Evidence::ProcessExit {
                    exit: Some(providers::ExitStatus::Code { code: 1 }),
                    timed_out: false,
                    duration_ms: ms,
                    stdout: out(text),
                    stderr: out(""),
                },
            }]
        };
        assert_eq!(fingerprint("x", &e(5, "a")), fingerprint("x", &e(900, "a")));
        assert_eq!(fingerprint("x", &e(5, "Ran 3 tests in 0.001s")), fingerprint("x", &e(5, "Ran 3 tests in 0.020s")));
        assert_ne!(fingerprint("x", &e(5, "a")), fingerprint("x", &e(5, "b")));
        assert_ne!(fingerprint("x", &e(5, "a")), fingerprint("y", &e(5, "a")));
    }
}
