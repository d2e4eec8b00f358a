//! What `engine approve` and `engine settle` print: a person's act, as
//! recorded — a person's word, never the engine's verification — and who
//! gave it (the `--actor` label and the operating-system user).

use serde_json::json;

use super::Output;
use crate::commands::approve::Recorded;
use crate::commands::settle::Settled;
use crate::store::acts::Person;

/// `alice` or `ops on call (user alice, uid 1000)`.
pub fn who(p: &Person) -> String {
    if p.actor == p.user {
        format!("{} (uid {})", p.user, p.uid)
    } else {
        format!("{} (user {}, uid {})", p.actor, p.user, p.uid)
    }
}

/// An act's `actor`, `user` and `uid` as recorded (the last two absent on
/// acts recorded before the engine kept them).
pub fn who_recorded(actor: &str, user: Option<&str>, uid: Option<u32>) -> String {
    match (user, uid) {
        (Some(user), Some(uid)) if user == actor => format!("{user} (uid {uid})"),
        (Some(user), Some(uid)) => format!("{actor} (user {user}, uid {uid})"),
        _ => format!("{actor} (operating-system user not recorded)"),
    }
}

pub fn settled(s: &Settled) -> Output {
    let text = format!(
        "settled {} (task {}, attempt {}) as {} by {} — recorded as a person's word, not verified by the engine; {}\n",
        s.operation_id,
        s.task_ref,
        s.attempt,
        s.outcome,
        who(&s.person),
        s.next
    );
    Output { text, json: json!({"ok": true, "settlement": s}), exit_code: 0 }
}

/// What an approval binds, as the person saw it: the request, the plan
/// revision and the call's cost.
fn binds(a: &Recorded) -> String {
    format!("  request digest  {}\n  plan revision   {}\n  cost            {}\n", a.request_digest, a.revision, a.cost)
}

/// `engine answer`'s words: what was recorded, and what sends it.
pub fn answered(a: &crate::commands::answer::Recorded) -> Output {
    let sends = if let Some(until) = &a.held_until {
        format!(
            "the run that holds the question open (until {until}) sends them now, in the call that waits (operation {})",
            a.operation_id
        )
    } else if a.approval_first {
        format!(
            "they go in a new call, operation {op}, which repeats the task's external or paid work: the next `engine run` stops APPROVAL_REQUIRED until a person approves it (`engine approve {op} --note {}`), then sends it",
            crate::decide::advice::SAY,
            op = a.operation_id
        )
    } else {
        format!("the next `engine run` sends them in a new call, operation {}", a.operation_id)
    };
    let text = format!(
        "answered task {} (goal {}, revision {}) by {}: {} to what its MCP server asked (attempt {}), on the act chain; {sends}",
        a.task_ref,
        a.goal_id,
        a.revision,
        who(&a.person),
        super::count(a.answers.len(), "answer"),
        a.asked_by_attempt,
    );
    let text = match a.expires_at_ms {
        Some(at) => format!(
            "{text}\nit expires at {} UTC ({}): past it, it is `expired`, never sent, and the task asks again\n",
            crate::clock::utc(at),
            crate::decide::expiry::words(at, crate::clock::now_ms())
        ),
        None => text,
    };
    Output { text, json: json!({"ok": true, "answer": a}), exit_code: 0 }
}

pub fn approved(a: &Recorded) -> Output {
    let text = if a.already_approved {
        format!(
            "already approved; waiting for the call: approval {} of {} (task {}) is not spent yet, so nothing new was recorded; one approval pays for one call: {}\n{}",
            a.approval_id,
            a.operation_id,
            a.task_ref,
            a.spent_by,
            binds(a)
        )
    } else {
        format!(
            "approved one call of {} (task {}) by {}; it is consumed by the next call of exactly this request, revision and cost: {}\n{}",
            a.operation_id,
            a.task_ref,
            who(&a.person),
            a.spent_by,
            binds(a)
        )
    };
    let text = match a.expires_at_ms {
        Some(at) => format!(
            "{text}\nit expires at {} UTC ({}): past it, it is `expired` and pays for no call\n",
            crate::clock::utc(at),
            crate::decide::expiry::words(at, crate::clock::now_ms())
        ),
        None => text,
    };
    Output { text, json: json!({"ok": true, "approval": a}), exit_code: 0 }
}

/// `engine hold` / `engine release`: the act as recorded.
pub fn held(h: &crate::commands::hold::Recorded) -> Output {
    let what = match &h.task_ref {
        Some(r) => format!("task {} of goal {}", super::escape::for_terminal(r), h.goal_id),
        None => format!("goal {} (every task)", h.goal_id),
    };
    let text = match (h.act, h.already_held) {
        ("hold", true) => format!("{what} is held already ({}): nothing new recorded; release with `{}`\n",
            super::escape::for_terminal(&h.reason), h.next),
        ("hold", false) => format!(
            "held {what} by {}: {}; nothing of it is started or retried until `{}` (its dependants wait; the rest goes on)\n",
            who(&h.person), super::escape::for_terminal(&h.reason), h.next),
        _ => format!("released {what} by {}; it runs at the next `{}`\n", who(&h.person), h.next),
    };
    Output { text, json: json!(h), exit_code: 0 }
}
