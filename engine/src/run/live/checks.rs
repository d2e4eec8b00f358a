//! Running validation, constraint and acceptance checks: argv commands in
//! the workspace, judged by exit code, with bounded captured output. One
//! path for all three, so whatever confines one confines them all. Each
//! check's process group is kept in the run's `Groups` while it runs, so a
//! person's stop ends it; a check a stop ended, or kept from starting, is
//! `stopped`, never passed or failed.

use std::path::PathBuf;

use providers::command::CommandProvider;
use providers::{Call, Outcome, Receipt};
use serde_json::json;

use super::stop::{self, Groups};
use crate::evidence::StopEnd;
use crate::limits::CHECK_TIMEOUT_DEFAULT;
use crate::run::check::{CheckRun, CheckSpec};

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
            env: scratch_env(),
            secrets: at.secrets.clone(),
            sandbox: at.sandbox.clone(),
            traceparent: None,
        };
        let (outcome, level) = stop::watched(&runner, &call, &at.groups, |_| async {}).await;
        out.push(run_of(check, outcome, level.end()));
    }
    out
}

/// A scratch place for what a check's interpreter writes for itself
/// (`interpreter_env`), and no `.pytest_cache`: nothing a check writes for
/// itself is then in the workspace, where it would read as a task's change.
pub fn scratch_env() -> Vec<(String, String)> {
    let mut env = interpreter_env();
    env.push(("PYTEST_ADDOPTS".to_string(), "-p no:cacheprovider".to_string()));
    env
}

/// Python's bytecode in a folder of the engine's process under the
/// temporary folder (`PYTHONPYCACHEPREFIX`, never a `__pycache__` beside
/// the sources), and none where no prefix applies
/// (`PYTHONDONTWRITEBYTECODE`): a check then never loads bytecode from the
/// workspace either. A task's own processes get no such variable (their
/// environment is the plan's to name): what they write is theirs, judged.
pub fn interpreter_env() -> Vec<(String, String)> {
    let prefix = std::env::temp_dir().join(format!("engine-pycache-{}", std::process::id()));
    vec![
        ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
        ("PYTHONPYCACHEPREFIX".to_string(), prefix.to_string_lossy().into_owned()),
    ]
}

/// A check that ran (or could not start), from the command's outcome.
fn run_of(check: CheckSpec, outcome: Outcome, stopped: Option<StopEnd>) -> CheckRun {
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
