//! A check as the run loop knows it: what to run (a task validation, a
//! goal constraint's check, or a goal acceptance check) and what running
//! it observed. Data only; the world runs them (`live::checks`).

use std::time::Duration;

use providers::{Captured, ExitStatus};

use crate::evidence::StopEnd;
use crate::plan::model::{Acceptance, Check, Validation};

/// A check to run.
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

    /// A check that did not run (or could not start), with why.
    pub fn empty(check: CheckSpec, not_started: Option<String>, stopped: Option<StopEnd>) -> CheckRun {
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
