//! What `engine approve` and `engine settle` print: a person's act, as
//! recorded — a person's word, never the engine's verification.

use serde_json::json;

use super::Output;
use crate::commands::approve::Recorded;
use crate::commands::settle::Settled;

pub fn settled(s: &Settled) -> Output {
    let text = format!(
        "settled {} (task {}, attempt {}) as {} by {} — recorded as a person's word, not verified by the engine; {}\n",
        s.operation_id, s.task_ref, s.attempt_id, s.outcome, s.actor, s.next
    );
    Output { text, json: json!({"ok": true, "settlement": s}), exit_code: 0 }
}

pub fn approved(a: &Recorded, actor: &str) -> Output {
    let text = format!(
        "approved one call of {} (task {}, request {}) by {}; it is consumed by the next call of exactly this request: {}\n",
        a.operation_id,
        a.task_ref,
        super::short(a.request_digest.as_str()),
        actor,
        a.spent_by
    );
    Output { text, json: json!({"ok": true, "approval": a}), exit_code: 0 }
}
