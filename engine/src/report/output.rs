//! `engine output REF [--attempt N] [--stderr]`: the whole output the
//! engine kept from a task's provider, bytes as they are into a file or a
//! pipe (a person asked for the raw output); into a terminal with its
//! control and bidirectional characters shown as escapes, like every other
//! output a person reads there. What was not kept (the middle of an output
//! over the capture bound) is said on stderr.

use std::io::{IsTerminal, Write};

use serde_json::json;

use super::Output;
use crate::error::{Error, Result};
use crate::evidence::{self, Evidence};
use crate::ids::{AttemptId, GoalId};
use crate::store::{LedgerRead, Store};

/// Which output a person asked for.
pub struct Which {
    pub goal: Option<GoalId>,
    pub task_ref: String,
    /// An attempt's number among the task's attempts (as `engine explain`
    /// numbers them); default: the task's latest attempt with output.
    pub attempt: Option<i64>,
    pub stderr: bool,
}

/// The output found: the attempt it belongs to (its ledger id and its
/// number among the task's attempts), the stream, the record.
struct Found {
    attempt: AttemptId,
    number: i64,
    stream: &'static str,
    output: evidence::Output,
}

pub fn render(store: &Store, which: &Which, as_json: bool) -> Result<Output> {
    let (found, bytes) = store.snapshot(|l| {
        let found = find(l, which)?;
        let bytes = l.blob(&found.output.blob)?.ok_or_else(|| {
            Error::new(
                crate::error::Code::StoreCorrupt,
                format!("blob {} is missing from the store", found.output.blob),
            )
        })?;
        Ok((found, bytes))
    })?;
    let gap = gap_note(&which.task_ref, &found);
    let json = json!({
        "task_ref": which.task_ref, "attempt": found.number, "attempt_id": found.attempt, "stream": found.stream,
        "total_bytes": found.output.total_bytes, "kept_bytes": found.output.kept_bytes,
        "truncated": found.output.truncated, "omitted": found.output.omitted, "blob": found.output.blob,
        "text": String::from_utf8_lossy(&bytes),
    });
    if !as_json {
        let mut out = std::io::stdout().lock();
        let _ = if out.is_terminal() {
            let text = String::from_utf8_lossy(&bytes);
            out.write_all(super::escape::for_terminal(&text).as_bytes())
        } else {
            out.write_all(&bytes)
        }
        .and_then(|_| out.flush());
    }
    if let Some(note) = gap {
        crate::say_line!("{}", super::escape::for_terminal(&note));
    }
    Ok(Output { text: String::new(), json, exit_code: 0 })
}

/// The attempt's output, or the newest attempt of the task that has one.
fn find(l: &dyn LedgerRead, which: &Which) -> Result<Found> {
    let g = l.goal_or_latest(which.goal.as_ref())?;
    let task_ref = which.task_ref.as_str();
    let attempts = l.attempts_of_task(&g.id, task_ref)?;
    if attempts.is_empty() {
        let known = l.tasks(&g.id, g.active_revision)?;
        if !known.iter().any(|t| t.task_ref == task_ref) {
            return Err(crate::commands::no_task(
                &g.id,
                g.active_revision,
                task_ref,
                known.iter().map(|t| t.task_ref.as_str()),
            ));
        }
        return Err(Error::usage(format!(
            "task {task_ref} of goal `{}` has no attempt yet: nothing was captured",
            g.id
        ))
        .at(task_ref));
    }
    let stream = if which.stderr { "stderr" } else { "stdout" };
    // Attempts are numbered per task, as `engine explain` shows them.
    let numbered = attempts.iter().enumerate().map(|(i, a)| (a, i as i64 + 1));
    if let Some(n) = which.attempt {
        let (a, number) = numbered.clone().find(|(_, i)| *i == n).ok_or_else(|| {
            let all: Vec<String> = numbered.clone().map(|(_, i)| i.to_string()).collect();
            Error::usage(format!("task {task_ref} has no attempt {n}; its attempts: {}", all.join(", "))).at(task_ref)
        })?;
        let output = stream_of(&l.evidence_of_attempt(a.id)?, which.stderr).ok_or_else(|| {
            Error::usage(format!(
                "attempt {n} of task {task_ref} has no captured {stream} (it was not answered, or its provider has no {stream}; see `engine explain {task_ref}`)"
            ))
            .at(task_ref)
        })?;
        return Ok(Found { attempt: a.id, number, stream, output });
    }
    for (a, number) in numbered.rev() {
        if let Some(output) = stream_of(&l.evidence_of_attempt(a.id)?, which.stderr) {
            return Ok(Found { attempt: a.id, number, stream, output });
        }
    }
    Err(Error::usage(format!(
        "no attempt of task {task_ref} has a captured {stream} (see `engine explain {task_ref}`)"
    ))
    .at(task_ref))
}

/// A provider's answer's stream: a process's stdout or stderr, an HTTP
/// body (stdout), an MCP result (stdout) or its server's stderr.
fn stream_of(evidence: &[evidence::Recorded], stderr: bool) -> Option<evidence::Output> {
    evidence.iter().find_map(|r| match (&r.evidence, stderr) {
        (Evidence::ProcessExit { stdout, .. }, false) => Some(stdout.clone()),
        (Evidence::ProcessExit { stderr, .. }, true) => Some(stderr.clone()),
        (Evidence::HttpResponse { body, .. }, false) => Some(body.clone()),
        (Evidence::ToolResult { body, .. }, false) => Some(body.clone()),
        (Evidence::ToolResult { stderr, .. }, true) => Some(stderr.clone()),
        _ => None,
    })
}

/// What was not kept, in words, when anything was not.
fn gap_note(task_ref: &str, f: &Found) -> Option<String> {
    let o = &f.output;
    let what = format!("engine output: task {task_ref} attempt {} {}", f.number, f.stream);
    match (o.truncated, o.omitted) {
        (_, Some(gap)) => Some(format!(
            "{what}: {} bytes were written and {} kept; {} bytes in the middle were not kept (the gap is at byte {} of what was printed)",
            o.total_bytes, o.kept_bytes, gap.bytes, gap.at
        )),
        (true, None) => Some(format!("{what}: {} bytes were written and only the first {} kept", o.total_bytes, o.kept_bytes)),
        (false, None) => None,
    }
}
