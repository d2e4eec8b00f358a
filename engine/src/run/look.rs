//! Looking at an attempt whose answer is missing, without sending it
//! again: first the provider is asked about the request by the handle it
//! gave it (an MCP task id: `Provider::resume`), then the effect is read
//! back by the task's `observe` rule (else the provider's default). What
//! was found goes to `decide::in_doubt`; every look is evidence.

use std::time::Duration;

use providers::{Call, Handle, Observation, Provider, ReadBack, Receipt, Resumed};
use serde_json::{json, Value};

use super::record::output;
use crate::decide::in_doubt::{self, Observed};
use crate::error::Result;
use crate::evidence::{handle_words, Evidence, HandleFound, ReadBackRecord};
use crate::store::LedgerTx;

/// What looking found.
pub(super) struct Looked {
    /// What the resolver weighs.
    pub observed: Observed,
    /// The provider's own answer, fetched by the handle.
    pub answer: Option<Receipt>,
    /// The handle asked about, what it found, in words.
    pub by_handle: Option<(Handle, HandleFound, String)>,
    pub read_back: Option<ReadBack>,
}

impl Looked {
    /// Nothing could be looked at.
    pub fn nothing() -> Looked {
        Looked { observed: Observed::NotObservable, answer: None, by_handle: None, read_back: None }
    }

    /// The read-back as an observation (verdict and one-line summary).
    pub fn observation(&self) -> Option<Observation> {
        self.read_back.clone().map(Observation::from)
    }

    /// Did anything get looked at?
    pub fn looked(&self) -> bool {
        self.by_handle.is_some() || self.read_back.is_some()
    }

    /// The looks as evidence, inside the caller's transaction (an answer
    /// read back is kept as a blob, with an excerpt beside it).
    pub fn evidence(&self, tx: &mut dyn LedgerTx) -> Result<Vec<Evidence>> {
        let mut list = Vec::new();
        if let Some((handle, found, evidence)) = &self.by_handle {
            list.push(Evidence::HandleLookup { handle: handle.clone(), found: *found, evidence: evidence.clone() });
        }
        if let (Some(rb), Some(observation)) = (&self.read_back, self.observation()) {
            list.push(Evidence::Observation { observation, read_back: Some(record(tx, rb)?) });
        }
        Ok(list)
    }

    /// The one-line summary of the read-back (empty without one).
    pub fn summary(&self) -> String {
        self.read_back.as_ref().map(ReadBack::summary).unwrap_or_default()
    }

    /// The read-back's request and deciding rule, for the receipt it stands in for.
    pub fn decided(&self) -> Value {
        match &self.read_back {
            Some(rb) => json!({"request": rb.request, "decided_by": rb.decider, "matched": rb.matched}),
            None => Value::Null,
        }
    }
}

/// A read-back as the ledger keeps it.
fn record(tx: &mut dyn LedgerTx, rb: &ReadBack) -> Result<ReadBackRecord> {
    let answer = match &rb.answer {
        Value::Null => None,
        v => {
            let text = serde_json::to_string(v).unwrap_or_default();
            let total = text.len() as u64;
            Some(output(tx, &providers::Captured { text, total_bytes: total, truncated: false, omitted: None })?)
        }
    };
    Ok(ReadBackRecord {
        request: rb.request.clone(),
        answer,
        decider: rb.decider,
        matched: rb.matched.clone(),
        failure: rb.failure.clone(),
    })
}

/// Look at `call`'s effect with `provider`: by `handle` when the attempt
/// holds one (and asking is meaningful), then by `rule` (the task's
/// `observe`; `None`: the provider's default).
pub(super) async fn look(
    provider: &dyn Provider,
    call: &Call,
    handle: Option<&Handle>,
    rule: Option<&Value>,
) -> Looked {
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
pub(super) fn resume_wait(
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
