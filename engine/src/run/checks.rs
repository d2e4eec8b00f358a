//! Running validation, constraint and acceptance checks: argv commands in
//! the workspace, judged by exit code, with bounded captured output. One
//! path for all three, so whatever confines one confines them all. Each
//! check's process group is kept in the run's `Groups` while it runs, so a
//! person's stop ends it; a check a stop ended, or kept from starting, is
//! `stopped`, never passed or failed.

use std::path::PathBuf;
use std::time::Duration;

use providers::command::CommandProvider;
use providers::{Call, Captured, ExitStatus, Outcome, Receipt};
use serde_json::json;

use super::stop::{self, Groups};
use crate::evidence::StopEnd;
use crate::limits::CHECK_TIMEOUT_DEFAULT;
use crate::plan::model::{Acceptance, Check, Validation};

/// A check to run (a task validation, a goal constraint's check, or a goal
/// acceptance check).
#[derive(Debug, Clone)]
pub struct CheckSpec {
    pub id: String,
    pub run: Vec<String>,
    pub expect_exit: i32,
    pub timeout: Option<Duration>,
    /// A goal constraint's check (`id` is the constraint's).
    pub of_constraint: bool,
}

impl CheckSpec {
    pub fn of_validation(v: &Validation) -> CheckSpec {
        CheckSpec {
            id: v.id.clone(),
            run: v.run.clone(),
            expect_exit: v.expect_exit,
            timeout: v.timeout_seconds.map(Duration::from_secs),
            of_constraint: false,
        }
    }

    /// A goal constraint's check.
    pub fn of_constraint(id: &str, c: &Check) -> CheckSpec {
        CheckSpec {
            id: id.to_string(),
            run: c.run.clone(),
            expect_exit: c.expect_exit,
            timeout: c.timeout_seconds.map(Duration::from_secs),
            of_constraint: true,
        }
    }

    /// An acceptance criterion's check, if it has one.
    pub fn of_acceptance(a: &Acceptance) -> Option<CheckSpec> {
        a.check.as_ref().map(|c| CheckSpec {
            id: a.id.clone(),
            run: c.run.clone(),
            expect_exit: c.expect_exit,
            timeout: c.timeout_seconds.map(Duration::from_secs),
            of_constraint: false,
        })
    }
}

/// What running a check observed.
#[derive(Debug, Clone)]
pub struct CheckRun {
    pub id: String,
    pub of_constraint: bool,
    pub expect_exit: i32,
    pub exit: Option<ExitStatus>,
    pub timed_out: bool,
    /// Could not start (missing program...): the message says why.
    pub not_started: Option<String>,
    pub stdout: Captured,
    pub stderr: Captured,
    /// A person's stop ended it (or kept it from starting): neither passed
    /// nor failed.
    pub stopped: Option<StopEnd>,
    /// Processes it started still ran after it exited (the engine ended
    /// them): it did not pass.
    pub descendants: Option<Box<providers::Descendants>>,
}

impl CheckRun {
    /// Passed means: it ran, was not cut by a deadline or a stop, and
    /// exited with exactly the expected code. A signal is never a pass.
    pub fn passed(&self) -> bool {
        self.not_started.is_none()
            && self.stopped.is_none()
            && !self.timed_out
            && self.descendants.is_none()
            && matches!(self.exit, Some(ExitStatus::Code { code }) if code == self.expect_exit)
    }
}

/// Where checks run: the workspace, the operation they check (their
/// `ENGINE_OPERATION_ID`), the secrets to redact, the run's process groups.
pub struct Place {
    pub workspace: PathBuf,
    pub operation_id: String,
    pub secrets: Vec<String>,
    pub groups: Groups,
    /// The Landlock sandbox the check's process runs in.
    pub sandbox: providers::sandbox::Sandbox,
}

/// Run `checks` one after another; once a person's stop began, the rest
/// are not started.
pub async fn run_checks(checks: Vec<CheckSpec>, at: &Place, output_bytes_max: usize) -> Vec<CheckRun> {
    let runner = CommandProvider { protocol: None };
    let mut out = Vec::with_capacity(checks.len());
    for check in checks {
        if at.groups.stopping() {
            out.push(CheckRun::empty(check, None, Some(StopEnd::NotStarted)));
            continue;
        }
        let call = Call {
            operation_id: at.operation_id.clone(),
            try_no: 1,
            request: json!({ "run": check.run }),
            workspace: at.workspace.clone(),
            timeout: Some(check.timeout.unwrap_or(CHECK_TIMEOUT_DEFAULT)),
            output_bytes_max,
            stdin: None,
            env: Vec::new(),
            secrets: at.secrets.clone(),
            sandbox: at.sandbox.clone(),
        };
        let (outcome, level) = stop::watched(&runner, &call, &at.groups, |_| async {}).await;
        out.push(CheckRun::of(check, outcome, level.end()));
    }
    out
}

impl CheckRun {
    /// A check that ran (or could not start), from the command's outcome.
    fn of(check: CheckSpec, outcome: Outcome, stopped: Option<StopEnd>) -> CheckRun {
        match outcome {
            Outcome::Received(Receipt::Command(r)) => CheckRun {
                id: check.id,
                of_constraint: check.of_constraint,
                expect_exit: check.expect_exit,
                exit: r.exit,
                timed_out: r.timed_out,
                not_started: None,
                stdout: r.stdout,
                stderr: r.stderr,
                stopped,
                descendants: r.descendants,
            },
            Outcome::NotDispatched(nd) => CheckRun::empty(check, Some(nd.message), stopped),
            Outcome::Received(other) => CheckRun::empty(
                check,
                Some(format!("a check ran as a command, but the answer was not a command's: {other:?}")),
                stopped,
            ),
            Outcome::Lost { detail, .. } => CheckRun::empty(check, Some(detail), stopped),
        }
    }

    fn empty(check: CheckSpec, not_started: Option<String>, stopped: Option<StopEnd>) -> CheckRun {
        CheckRun {
            id: check.id,
            of_constraint: check.of_constraint,
            expect_exit: check.expect_exit,
            exit: None,
            timed_out: false,
            not_started,
            stdout: Captured::default(),
            stderr: Captured::default(),
            stopped,
            descendants: None,
        }
    }
}
