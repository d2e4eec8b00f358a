//! What looking at an attempt whose answer is missing found, without
//! sending it again: the provider asked about the request by the handle
//! it gave it (an MCP task id), then the effect read back by the task's
//! `observe` rule (else the provider's default). Data only: the world
//! looks (`live::look`), the in-doubt resolver weighs `observed`, and the
//! ledger keeps every look as evidence (`driver::ledger`).

use providers::{Handle, Observation, ReadBack, Receipt};
use serde_json::{json, Value};

use crate::decide::in_doubt::Observed;
use crate::evidence::HandleFound;

/// What looking found.
#[derive(Debug, Clone)]
pub struct Looked {
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
