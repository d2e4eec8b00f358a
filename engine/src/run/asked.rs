//! What a person asked of a run, beyond running the plan: operations to
//! re-send (`engine retry`) and tasks to repair (`engine repair`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::evidence::Classification;
use crate::ids::{AttemptId, OperationId, RequestDigest};

/// What a person asked of this run, beyond running the plan.
#[derive(Debug, Default)]
pub struct Asked {
    /// Operations a person asked to re-send (`engine retry`).
    pub retry: HashSet<OperationId>,
    /// Tasks a person asked to repair (`engine repair`), by ref.
    pub repairs: HashMap<String, Repair>,
}

/// What a repair sends: a new request (the instruction is part of it) with
/// the failure evidence handed to the provider.
#[derive(Debug, Clone)]
pub struct Repair {
    pub operation_id: OperationId,
    pub request_digest: RequestDigest,
    pub instruction: Option<String>,
    pub failed_attempt: AttemptId,
    pub classification: Option<Classification>,
    pub evidence: Value,
}
