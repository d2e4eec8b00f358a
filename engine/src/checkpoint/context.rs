//! A context command's value (a checkpoint's `context: {"name": [argv]}`):
//! run as any provider command is — through the command provider, in its
//! own process group, under a deadline, its output bounded, with no
//! `ENGINE_*` variable — never as a bare child of the engine.

use std::path::Path;
use std::time::Duration;

use providers::command::CommandProvider;
use providers::sandbox::Sandbox;
use providers::{Call, Outcome, Provider, Receipt};
use serde_json::json;

use crate::limits::{CONTEXT_COMMAND_TIMEOUT, CONTEXT_OUTPUT_BYTES_MAX, CONTEXT_VALUE_CHARS_MAX};

/// The command's trimmed stdout (its stderr when stdout is empty), at most
/// `CONTEXT_VALUE_CHARS_MAX` characters; or `error: ...` when it could not
/// run or did not finish in time. The exit code is not part of it.
pub fn command_value(workspace_dir: &Path, argv: &[String], sandbox: &Sandbox) -> String {
    value_within(workspace_dir, argv, sandbox, CONTEXT_COMMAND_TIMEOUT)
}

fn value_within(workspace_dir: &Path, argv: &[String], sandbox: &Sandbox, timeout: Duration) -> String {
    if argv.is_empty() {
        return "error: empty argv".into();
    }
    let call = Call {
        operation_id: "context".into(),
        try_no: 1,
        request: json!({ "run": argv }),
        workspace: workspace_dir.to_path_buf(),
        timeout: Some(timeout),
        output_bytes_max: CONTEXT_OUTPUT_BYTES_MAX,
        stdin: None,
        env: Vec::new(),
        secrets: Vec::new(),
        sandbox: sandbox.clone(),
        traceparent: None,
    };
    match run(call) {
        Outcome::Received(Receipt::Command(r)) if r.timed_out => {
            format!("error: timed out after {}s", timeout.as_secs())
        }
        Outcome::Received(Receipt::Command(r)) => {
            let mut s = r.stdout.text.trim().to_string();
            if s.is_empty() {
                s = r.stderr.text.trim().to_string();
            }
            s.chars().take(CONTEXT_VALUE_CHARS_MAX).collect()
        }
        Outcome::NotDispatched(nd) => format!("error: {}", nd.message),
        Outcome::Lost { detail, .. } => format!("error: {detail}"),
        Outcome::Received(other) => format!("error: not a command's answer: {other:?}"),
    }
}

/// Run one call to completion on a thread of its own (with its own
/// runtime): the caller may be inside the run's runtime, and the
/// provider's deadline bounds the wait.
fn run(call: Call) -> Outcome {
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        match rt {
            Ok(rt) => rt.block_on(async {
                let (tx, _rx) = providers::progress_channel();
                CommandProvider::default().dispatch(&call, tx).await
            }),
            Err(e) => not_started(format!("no runtime for the command: {e}")),
        }
    });
    thread.join().unwrap_or_else(|_| not_started("the command's thread failed".into()))
}

fn not_started(message: String) -> Outcome {
    Outcome::NotDispatched(providers::NotDispatched { kind: providers::NotDispatchedKind::Other, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// For the tests of something else than the sandbox.
    fn command_value(d: &Path, argv: &[String]) -> String {
        super::command_value(d, argv, &Sandbox::disabled())
    }

    #[test]
    fn a_context_command_runs_in_the_sandbox_it_is_given() {
        let root = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let policy = providers::sandbox::Policy::builder(&ws).temp_dirs([]).build().unwrap();
        let sandbox = policy.prepare().unwrap();
        // The folder is the script's `$0`, not part of its text: a quote in
        // the clone's path must not end a quoted string.
        let script = "echo x > \"$0/y\" 2>/dev/null && echo wrote || echo refused";
        let outside = outside.to_str().unwrap();
        assert_eq!(super::command_value(&ws, &argv(&["sh", "-c", script, outside]), &sandbox), "refused");
        assert_eq!(command_value(&ws, &argv(&["sh", "-c", script, outside])), "wrote");
    }

    #[test]
    fn the_value_is_trimmed_stdout_or_else_stderr() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(command_value(d.path(), &argv(&["sh", "-c", "echo '  3.11.7  '"])), "3.11.7");
        assert_eq!(command_value(d.path(), &argv(&["sh", "-c", "echo from-stderr >&2; exit 2"])), "from-stderr");
        assert_eq!(command_value(d.path(), &argv(&[])), "error: empty argv");
        assert!(command_value(d.path(), &argv(&["/nonexistent/ctx"])).starts_with("error: cannot start"));
    }

    #[test]
    fn the_value_is_bounded_and_engine_variables_are_not_seen() {
        let d = tempfile::tempdir().unwrap();
        let long = command_value(d.path(), &argv(&["sh", "-c", "yes x | tr -d '\\n' | head -c 100000"]));
        assert_eq!(long.chars().count(), CONTEXT_VALUE_CHARS_MAX);
        std::env::set_var("ENGINE_STORE", "/secret/store.db");
        let env = command_value(d.path(), &argv(&["sh", "-c", "echo \"[$ENGINE_STORE]\""]));
        assert_eq!(env, "[]", "a context command never sees the store path");
    }

    #[test]
    fn a_command_that_does_not_finish_is_ended_at_its_deadline() {
        let d = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let none = Sandbox::disabled();
        let v = value_within(d.path(), &argv(&["sh", "-c", "echo partial; sleep 30"]), &none, Duration::from_secs(1));
        assert_eq!(v, "error: timed out after 1s");
        assert!(started.elapsed() < Duration::from_secs(10), "the engine did not wait it out");
    }
}
