//! Looking at an attempt whose answer is missing, without sending it
//! again: first the provider is asked about the request by the handle it
//! gave it (an MCP task id: `Provider::resume`), then the effect is read
//! back by the task's `observe` rule (else the provider's default). What
//! was found (`run::looked`) goes to `decide::in_doubt`; every look is
//! evidence.

use std::time::Duration;

use providers::{Call, Handle, Provider, Resumed};
use serde_json::Value;

use crate::decide::in_doubt::{self, Observed};
use crate::evidence::{handle_words, HandleFound};
use crate::run::looked::Looked;

/// Look at `call`'s effect with `provider`: by `handle` when the attempt
/// holds one (and asking is meaningful), then by `rule` (the task's
/// `observe`; `None`: the provider's default).
pub async fn look(provider: &dyn Provider, call: &Call, handle: Option<&Handle>, rule: Option<&Value>) -> Looked {
    let mut by_handle = None;
    if let Some(h) = handle {
        if let Some(fut) = provider.resume(call, h) {
            match fut.await {
                Resumed::Receipt(receipt) => {
                    let words = format!("{} ended; its answer is the receipt", handle_words(h));
                    return Looked {
                        observed: Observed::Answered,
                        answer: Some(receipt),
                        by_handle: Some((h.clone(), HandleFound::Answered, words)),
                        read_back: None,
                    };
                }
                Resumed::Running { evidence } => by_handle = Some((h.clone(), HandleFound::Running, evidence)),
                Resumed::Inconclusive { evidence } => by_handle = Some((h.clone(), HandleFound::Unknown, evidence)),
            }
        }
    }
    let read_back = match provider.read_back(call, rule) {
        Some(fut) => Some(fut.await),
        None => None,
    };
    let observed = in_doubt::looked(by_handle.as_ref().map(|b| b.1), read_back.as_ref().map(|r| r.verdict));
    Looked { observed, answer: None, by_handle, read_back }
}

/// How long to wait for an accepted request when asking about it again:
/// what is left of the task's deadline since its dispatch (nothing left:
/// one look, `None`), else what is left of the goal's wall-clock budget.
pub fn resume_wait(
    task_timeout: Option<Duration>,
    dispatched_at_ms: Option<i64>,
    goal_left: Duration,
    now_ms: i64,
) -> Option<Duration> {
    let left = match (task_timeout, dispatched_at_ms) {
        (Some(t), Some(at)) => t.saturating_sub(Duration::from_millis((now_ms - at).max(0) as u64)),
        (Some(t), None) => t,
        (None, _) => goal_left,
    };
    (!left.is_zero()).then_some(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_waits_what_is_left_of_the_deadline() {
        let s = Duration::from_secs;
        assert_eq!(resume_wait(Some(s(60)), Some(1_000), s(3600), 21_000), Some(s(40)));
        assert_eq!(resume_wait(Some(s(10)), Some(1_000), s(3600), 61_000), None, "nothing left: one look");
        assert_eq!(resume_wait(Some(s(10)), None, s(3600), 61_000), Some(s(10)));
        assert_eq!(resume_wait(None, Some(1_000), s(90), 61_000), Some(s(90)));
        assert_eq!(resume_wait(None, Some(1_000), s(0), 61_000), None);
    }
}
