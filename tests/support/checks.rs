//! What must hold after a session, checked against the providers' own
//! delivery logs (the ground truth of what happened) and the ledger:
//!
//! - `engine verify` passes;
//! - no (operation, try) was delivered twice;
//! - nothing was sent again without a person: a task's operation has no
//!   more deliveries than its first plus the person's acts that allow a
//!   repeat (approvals for paid or external work, retries for local work);
//! - a satisfied goal's every operation was delivered;
//! - every receipt the provider gave (not an observation) matches a
//!   delivery in its log (`dispatched` is not `received`, and neither is
//!   a receipt the provider never sent);
//! - nothing a person settled `not_run` was delivered after all;
//! - no provider received an `ENGINE_*` variable but its identity.

use std::collections::HashMap;

use serde_json::Value;

use super::kill::{self, Kill};
use super::ledger::Ledger;
use super::person::{Ending, Session};

/// The two variables a provider may see.
const PROVIDER_ENV: &[&str] = &["ENGINE_OPERATION_ID", "ENGINE_TRY"];

/// Run every check; each failure becomes one of the session's findings.
pub fn after_session(s: &mut Session, ending: &Ending) {
    let verified = verify_passes(s);
    let deliveries = s.inst.deliveries(s.rcv);
    let mut per_try: HashMap<(&str, i64), usize> = HashMap::new();
    let mut per_op: HashMap<&str, u32> = HashMap::new();
    for d in &deliveries {
        *per_try.entry((d.key.as_str(), d.try_no)).or_default() += 1;
        *per_op.entry(d.key.as_str()).or_default() += 1;
    }
    let mut found = Vec::new();
    for ((op, try_no), n) in &per_try {
        if *n > 1 {
            found.push(format!("{op} try {try_no} was delivered {n} times"));
        }
    }
    for t in &s.inst.tasks {
        let n = per_op.get(t.operation_id.as_str()).copied().unwrap_or(0);
        let approvals = s.approvals.get(&t.operation_id).copied().unwrap_or(0);
        let retries = s.retries.get(&t.operation_id).copied().unwrap_or(0);
        if let Some(allowed) = t.deliveries_allowed(approvals, retries) {
            if n > allowed {
                found.push(format!(
                    "task {} ({}, cost {}, {}) was delivered {n} times; a person allowed {allowed} ({approvals} approvals, {retries} retries)",
                    t.task_ref,
                    t.effect,
                    t.cost,
                    if t.idempotent { "idempotent" } else { "not idempotent" }
                ));
            }
        }
        if *ending == Ending::Satisfied && n == 0 {
            found.push(format!("the goal is satisfied but task {}'s operation was never delivered", t.task_ref));
        }
    }
    for (op, try_no) in &s.settled_not_run {
        if per_try.contains_key(&(op.as_str(), *try_no)) {
            found.push(format!(
                "{op} try {try_no} was settled not_run (no delivery after {} ms) but was delivered after all: a provider finished after the engine died",
                super::person::GRACE.as_millis()
            ));
        }
    }
    for d in deliveries.iter().filter(|d| d.log == "tools") {
        let names: Vec<&str> =
            d.record["engine_env"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if names.iter().any(|n| !PROVIDER_ENV.contains(n)) {
            found.push(format!("{} try {} ran with {names:?}", d.key, d.try_no));
        }
    }
    // Read the ledger only once verify accepts it (and never before: a
    // test's own connection would roll back what the engine left).
    if verified {
        found.extend(receipts_delivered(s, &per_try));
    }
    found.sort();
    for f in found {
        s.finding(f);
    }
}

fn verify_passes(s: &mut Session) -> bool {
    let ran = kill::run(&s.inst.ws, &["verify"], Kill::Never);
    let passed = ran.out.exit() == Some(0);
    if !passed {
        let doc: Option<Value> = serde_json::from_str(&ran.out.stdout).ok();
        let message = doc.as_ref().and_then(|d| d.pointer("/error/message")).and_then(Value::as_str);
        s.finding(format!(
            "engine verify exits {:?}: {}",
            ran.out.exit(),
            message.map_or_else(|| ran.out.stderr.trim().to_string(), str::to_string)
        ));
    }
    passed
}

/// Receipts from a provider's answer (not from an observation) whose
/// (operation, try) is missing from the provider's log.
fn receipts_delivered(s: &Session, per_try: &HashMap<(&str, i64), usize>) -> Vec<String> {
    if !s.inst.ws.store().exists() {
        return Vec::new();
    }
    let Some(ledger) = Ledger::try_open(&s.inst.ws.store()) else {
        return vec!["the ledger's receipts cannot be read: the store does not open".to_string()];
    };
    let attempts: HashMap<i64, (String, i64)> =
        ledger.attempts().into_iter().map(|a| (a.id, (a.operation_id, a.try_no))).collect();
    let mut receipts = ledger.receipts();
    receipts.sort_by_key(|r| r.attempt_id);
    receipts
        .into_iter()
        .filter(|r| r.data["source"] != "observation")
        .filter_map(|r| attempts.get(&r.attempt_id.get()).cloned())
        .filter(|(op, try_no)| !per_try.contains_key(&(op.as_str(), *try_no)))
        .map(|(op, try_no)| {
            format!("{op} try {try_no} has a provider's receipt but the provider's log has no such delivery")
        })
        .collect()
}
