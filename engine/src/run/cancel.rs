//! A person's interrupt (Ctrl-C) and the requests a provider accepted under
//! its own name (an MCP task): each is asked to stop (`tasks/cancel`), and
//! what the provider said is written down. Nothing else changes: a
//! confirmed cancel is not proof that nothing happened, so each attempt's
//! answer — or its absence — is judged as any other.
//!
//! The interrupt path calls `Runner::cancel_accepted` before it ends the
//! run; the providers are shut down after it, as on every path out.

use std::sync::Arc;

use providers::{Call, Cancelled, Handle, Provider};
use serde_json::json;

use super::Runner;
use crate::error::Result;
use crate::ids::AttemptId;
use crate::store::events::EventKind;
use crate::store::Durability;

/// One accepted request still out.
pub(super) struct Accepted {
    pub attempt_id: AttemptId,
    pub task_ref: String,
    pub provider: Arc<dyn Provider>,
    pub call: Call,
    pub handle: Handle,
}

/// What asking to cancel one request found: `None` when its provider
/// cannot cancel at all.
pub(super) struct Asked {
    pub accepted: Accepted,
    pub answer: Option<Cancelled>,
}

/// Ask each provider to cancel its accepted requests, one after another
/// (a person is waiting; each provider bounds its own request).
pub(super) async fn cancel_each(accepted: Vec<Accepted>) -> Vec<Asked> {
    let mut asked = Vec::with_capacity(accepted.len());
    for a in accepted {
        let answer = match a.provider.cancel(&a.call, &a.handle) {
            Some(fut) => Some(fut.await),
            None => None,
        };
        asked.push(Asked { accepted: a, answer });
    }
    asked
}

impl Runner<'_> {
    /// The requests in flight that a provider accepted under a handle.
    fn accepted(&self) -> Vec<Accepted> {
        let mut out: Vec<Accepted> = self
            .in_flight
            .iter()
            .filter_map(|(id, f)| {
                let (name, call) = f.call.as_ref()?;
                Some(Accepted {
                    attempt_id: *id,
                    task_ref: f.task_ref.clone(),
                    provider: Arc::clone(self.providers.get(name)?),
                    call: call.clone(),
                    handle: f.handle.clone()?,
                })
            })
            .collect();
        out.sort_by_key(|a| a.attempt_id);
        out
    }

    /// A person's interrupt: ask every provider to cancel what it accepted
    /// and is still working on, and record each answer as a
    /// `cancel_requested` event of its attempt. Returns how many were asked.
    #[allow(dead_code)] // the interrupt path (Ctrl-C handling) calls it
    pub(super) async fn cancel_accepted(&mut self) -> Result<usize> {
        let asked = cancel_each(self.accepted()).await;
        for a in &asked {
            let data = match &a.answer {
                Some(c) => json!({"handle": a.accepted.handle, "confirmed": c.confirmed, "evidence": c.evidence}),
                None => json!({"handle": a.accepted.handle, "confirmed": false,
                               "evidence": "the provider cannot cancel a request"}),
            };
            let (task_ref, attempt) = (a.accepted.task_ref.clone(), a.accepted.attempt_id);
            self.write_event(Durability::Full, EventKind::CancelRequested, Some(&task_ref), Some(attempt), data)?;
        }
        Ok(asked.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use providers::{BoxFuture, Outcome, ProgressSender};

    use super::*;

    /// A provider that records the task ids it was asked to cancel, and
    /// confirms those starting with `ok`.
    #[derive(Default)]
    struct Recorder {
        cancelled: Mutex<Vec<String>>,
        can_cancel: bool,
    }

    impl Provider for Recorder {
        fn identity(&self) -> serde_json::Value {
            json!("recorder")
        }
        fn dispatch<'a>(&'a self, _call: &'a Call, _progress: ProgressSender) -> BoxFuture<'a, Outcome> {
            Box::pin(std::future::pending())
        }
        fn cancel<'a>(&'a self, _call: &'a Call, handle: &'a Handle) -> Option<BoxFuture<'a, Cancelled>> {
            if !self.can_cancel {
                return None;
            }
            let Handle::McpTask { task_id, .. } = handle;
            self.cancelled.lock().ok()?.push(task_id.clone());
            let confirmed = task_id.starts_with("ok");
            Some(Box::pin(async move { Cancelled { confirmed, evidence: format!("asked about {confirmed}") } }))
        }
    }

    fn call() -> Call {
        Call {
            operation_id: "op_1".into(),
            try_no: 1,
            request: json!({}),
            workspace: std::env::temp_dir(),
            timeout: None,
            output_bytes_max: 1024,
            stdin: None,
            env: Vec::new(),
            secrets: Vec::new(),
        }
    }

    fn accepted(id: i64, provider: &Arc<Recorder>, task_id: &str) -> Accepted {
        Accepted {
            attempt_id: AttemptId(id),
            task_ref: format!("T{id}"),
            provider: Arc::clone(provider) as Arc<dyn Provider>,
            call: call(),
            handle: Handle::McpTask { task_id: task_id.into(), session: None },
        }
    }

    #[test]
    fn every_accepted_request_is_asked_and_each_answer_kept() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let p = Arc::new(Recorder { can_cancel: true, ..Recorder::default() });
        let asked = rt.block_on(cancel_each(vec![accepted(1, &p, "ok-1"), accepted(2, &p, "gone-2")]));
        assert_eq!(*p.cancelled.lock().unwrap(), vec!["ok-1".to_string(), "gone-2".to_string()]);
        let confirmed: Vec<Option<bool>> = asked.iter().map(|a| a.answer.as_ref().map(|c| c.confirmed)).collect();
        assert_eq!(confirmed, vec![Some(true), Some(false)]);
    }

    #[test]
    fn a_provider_that_cannot_cancel_is_said_so_not_skipped() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let p = Arc::new(Recorder::default());
        let asked = rt.block_on(cancel_each(vec![accepted(1, &p, "ok-1")]));
        assert_eq!(asked.len(), 1);
        assert!(asked[0].answer.is_none());
        assert!(p.cancelled.lock().unwrap().is_empty());
    }
}
