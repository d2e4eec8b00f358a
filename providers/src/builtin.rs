//! The builtin provider: work the engine does itself — no process, no
//! socket, no file, nothing outside it changes. A testing and benchmarking
//! aid: a builtin call goes through exactly the bookkeeping of any other
//! provider's (intent, dispatch, receipt, validations, classification), so
//! a run of builtin tasks measures the engine's own cost per step, and a
//! test can exercise the ledger without starting programs.
//!
//! Actions (the task's `action`):
//! - `{"op": "noop"}` — answers at once;
//! - `{"op": "sleep", "ms": N}` — answers after N milliseconds,
//!   0 ≤ N ≤ [`SLEEP_MS_MAX`]; a call deadline shorter than N cuts the
//!   sleep and the receipt says `timed_out`.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::observe::ConfigError;
use crate::{
    BoxFuture, BuiltinReceipt, Call, NotDispatched, NotDispatchedKind, Outcome, Progress, ProgressSender, Provider,
    Receipt,
};

/// The longest `sleep` (10 minutes): long enough to stand in for a slow
/// provider in a test, short enough that a typo cannot park a run for days.
pub const SLEEP_MS_MAX: u64 = 10 * 60 * 1000;

/// What a builtin call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Noop,
    Sleep { ms: u64 },
}

impl Op {
    /// Read an action; the error's path is inside it (`op`, `ms`, or empty
    /// for the action itself).
    pub fn parse(action: &Value) -> Result<Op, ConfigError> {
        let obj = action.as_object().ok_or_else(|| ConfigError::new("", "a builtin action must be an object"))?;
        if let Some(key) = obj.keys().find(|k| !matches!(k.as_str(), "op" | "ms")) {
            return Err(ConfigError::new(
                key.as_str(),
                format!("unknown field `{key}` for a builtin provider's action, expected `op` (and `ms` for sleep)"),
            ));
        }
        let op =
            obj.get("op").ok_or_else(|| ConfigError::new("", "a builtin action needs `op`: \"noop\" or \"sleep\""))?;
        match (op.as_str(), obj.get("ms")) {
            (Some("noop"), None) => Ok(Op::Noop),
            (Some("noop"), Some(_)) => Err(ConfigError::new("ms", "`ms` belongs to `sleep`, not to `noop`")),
            (Some("sleep"), Some(ms)) => match ms.as_u64() {
                Some(ms) if ms <= SLEEP_MS_MAX => Ok(Op::Sleep { ms }),
                _ => Err(ConfigError::new(
                    "ms",
                    format!("`ms` must be a whole number of milliseconds from 0 to {SLEEP_MS_MAX}"),
                )),
            },
            (Some("sleep"), None) => Err(ConfigError::new("", "a builtin `sleep` needs `ms`")),
            _ => Err(ConfigError::new("op", "`op` must be \"noop\" or \"sleep\"")),
        }
    }
}

/// The builtin provider (it has no configuration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuiltinProvider;

impl Provider for BuiltinProvider {
    fn identity(&self) -> Value {
        json!({ "kind": "builtin" })
    }

    fn dispatch<'a>(&'a self, call: &'a Call, progress: ProgressSender) -> BoxFuture<'a, Outcome> {
        Box::pin(run(call, progress))
    }
}

async fn run(call: &Call, progress: ProgressSender) -> Outcome {
    let op = match Op::parse(&call.request) {
        Ok(op) => op,
        Err(e) => {
            let message = format!("builtin request {}: {e}", call.request);
            return Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, message });
        }
    };
    let started = Instant::now();
    let detail = match op {
        Op::Noop => "builtin noop".to_string(),
        Op::Sleep { ms } => format!("builtin sleep {ms} ms"),
    };
    let _ = progress.try_send(Progress::Dispatched { detail });
    let mut timed_out = false;
    if let Op::Sleep { ms } = op {
        let wanted = Duration::from_millis(ms);
        let slept = call.timeout.map_or(wanted, |deadline| deadline.min(wanted));
        tokio::time::sleep(slept).await;
        timed_out = slept < wanted;
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Outcome::Received(Receipt::Builtin(BuiltinReceipt { op, timed_out, duration_ms }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(request: Value, timeout: Option<Duration>) -> Call {
        Call {
            operation_id: "op_test".into(),
            try_no: 1,
            request,
            workspace: std::env::temp_dir(),
            timeout,
            output_bytes_max: 1024,
            stdin: None,
            env: Vec::new(),
            secrets: Vec::new(),
            sandbox: crate::sandbox::Sandbox::disabled(),
            traceparent: None,
        }
    }

    async fn dispatch(request: Value, timeout: Option<Duration>) -> (Outcome, Vec<Progress>) {
        let (tx, mut rx) = crate::progress_channel();
        let outcome = BuiltinProvider.dispatch(&call(request, timeout), tx).await;
        let mut seen = Vec::new();
        while let Ok(p) = rx.try_recv() {
            seen.push(p);
        }
        (outcome, seen)
    }

    #[test]
    fn actions_parse_with_the_place_of_each_error() {
        assert_eq!(Op::parse(&json!({"op": "noop"})), Ok(Op::Noop));
        assert_eq!(Op::parse(&json!({"op": "sleep", "ms": 0})), Ok(Op::Sleep { ms: 0 }));
        assert_eq!(Op::parse(&json!({"op": "sleep", "ms": SLEEP_MS_MAX})), Ok(Op::Sleep { ms: SLEEP_MS_MAX }));
        let place = |v: Value| Op::parse(&v).unwrap_err().path;
        assert_eq!(place(json!({"op": "sleep", "ms": SLEEP_MS_MAX + 1})), "ms");
        assert_eq!(place(json!({"op": "sleep", "ms": -1})), "ms");
        assert_eq!(place(json!({"op": "sleep", "ms": 1.5})), "ms");
        assert_eq!(place(json!({"op": "sleep", "ms": "5"})), "ms");
        assert_eq!(place(json!({"op": "sleep"})), "");
        assert_eq!(place(json!({"op": "noop", "ms": 5})), "ms");
        assert_eq!(place(json!({"op": "fly"})), "op");
        assert_eq!(place(json!({"op": 1})), "op");
        assert_eq!(place(json!({})), "");
        assert_eq!(place(json!({"op": "noop", "run": ["true"]})), "run");
        assert_eq!(place(json!(["noop"])), "");
    }

    #[tokio::test]
    async fn noop_is_dispatched_then_answered() {
        let (outcome, progress) = dispatch(json!({"op": "noop"}), None).await;
        assert_eq!(progress, vec![Progress::Dispatched { detail: "builtin noop".into() }]);
        match outcome {
            Outcome::Received(Receipt::Builtin(r)) => {
                assert_eq!((r.op, r.timed_out), (Op::Noop, false));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn sleep_takes_its_time_and_a_shorter_deadline_cuts_it() {
        let started = Instant::now();
        let (outcome, _) = dispatch(json!({"op": "sleep", "ms": 30}), None).await;
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(matches!(outcome, Outcome::Received(Receipt::Builtin(BuiltinReceipt { timed_out: false, .. }))));

        let started = Instant::now();
        let (outcome, _) = dispatch(json!({"op": "sleep", "ms": 60_000}), Some(Duration::from_millis(20))).await;
        assert!(started.elapsed() < Duration::from_secs(30), "the deadline, not the sleep, ended it");
        match outcome {
            Outcome::Received(Receipt::Builtin(r)) => assert!(r.timed_out, "{r:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_malformed_request_is_never_dispatched() {
        let (outcome, progress) = dispatch(json!({"op": "fly"}), None).await;
        assert!(progress.is_empty());
        assert!(
            matches!(outcome, Outcome::NotDispatched(NotDispatched { kind: NotDispatchedKind::BadRequest, .. })),
            "{outcome:?}"
        );
    }
}
