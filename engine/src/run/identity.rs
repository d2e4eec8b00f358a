//! What a task's checkpoint carries beyond its inputs and its MCP tools'
//! listings: each dependency's recorded outputs, by digest, read from the
//! ledger (`decide::reuse::cutoff`), so that a completion stands on the
//! bytes its upstream left and not on the fact that the upstream ran; and
//! who does its work — a command's executable and script, by digest
//! (`decide::reuse::tool`). The run (its observations, its reuse pass, its
//! early cutoff) and `engine revise` add the same entries, so a recorded
//! checkpoint and one observed now compare.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::checkpoint::FileCache;
use crate::checkpoint::RecordedCheckpoint;
use crate::decide::reuse::{cutoff, tool};
use crate::error::Result;
use crate::ids::{AttemptId, GoalId, Revision};
use crate::plan::{Plan, ProviderSpec, Task};
use crate::store::evidence::CompletionRecord;
use crate::store::LedgerRead;

/// The newest value of each identity known only from a call's answer (an
/// HTTP service's version, an agent's model: `decide::reuse::tool`) among
/// `completions`, by attempt. Only the completions of providers that
/// report one are read.
pub type Newest = BTreeMap<String, (AttemptId, String)>;

pub fn newest_of<'a>(plan: &Plan, completions: impl IntoIterator<Item = (&'a String, &'a CompletionRecord)>) -> Newest {
    let reporting =
        |r: &str| plan.task(r).and_then(|t| plan.file.providers.get(&t.provider)).is_some_and(tool::reports_identity);
    let parsed: Vec<(AttemptId, crate::checkpoint::Checkpoint)> = completions
        .into_iter()
        .filter(|(r, _)| reporting(r))
        .filter_map(|(_, c)| Some((c.attempt_id, c.checkpoint.as_ref()?.checkpoint()?)))
        .collect();
    tool::newest(parsed.iter().map(|(a, cp)| (*a, cp)))
}

/// `newest_of` the completions of `revision`, read only when some
/// provider of the plan reports its identity.
pub fn newest_reported(read: &dyn LedgerRead, (goal, revision): (&GoalId, Revision), plan: &Plan) -> Result<Newest> {
    if !plan.file.providers.values().any(tool::reports_identity) {
        return Ok(Newest::new());
    }
    Ok(newest_of(plan, &read.completions(goal, revision)?))
}

/// The reported identities `recorded` carries for `task`, as known now
/// (`decide::reuse::tool::reported_now`). A checkpoint is parsed only when
/// the provider reports its identity or the completion recorded one.
pub fn reported_context(
    plan: &Plan,
    task: &Task,
    recorded: Option<&RecordedCheckpoint>,
    newest: &Newest,
) -> BTreeMap<String, String> {
    let spec = plan.file.providers.get(&task.provider);
    let Some(recorded) = recorded else { return BTreeMap::new() };
    let names = [tool::version_name(&task.provider), tool::model_name(&task.provider)];
    if !spec.is_some_and(tool::reports_identity) && !recorded.may_name(&names) {
        return BTreeMap::new();
    }
    match recorded.checkpoint() {
        Some(then) => tool::reported_now(spec, task, &then.context, newest),
        None => BTreeMap::new(),
    }
}

/// What a task's checkpoint carries beside its inputs, put together one
/// way by every pass that judges a completion (the reuse pass, early
/// cutoff, a run's look with identity, `engine revise`): its tools'
/// entries (`tools`), its dependencies' recorded outputs (`upstream`:
/// `upstream_context`) and its own tool's identity (`tool_context_in`,
/// programs looked up through `programs`).
pub fn carried(
    plan: &Plan,
    task: &Task,
    (tools, upstream): (BTreeMap<String, String>, BTreeMap<String, String>),
    (cache, programs): (&mut FileCache, &mut Programs),
) -> BTreeMap<String, String> {
    let mut out = tools;
    out.extend(upstream);
    out.extend(tool_context_in(plan, task, cache, programs));
    out
}

/// `upstream:<ref>` for each dependency of `task` that can cut off (it
/// declares outputs, its effect is not external): the digest of the
/// outputs its completion in `revision` recorded (`none`: no completion).
pub fn upstream_context(
    read: &dyn LedgerRead,
    (goal, revision): (&GoalId, Revision),
    plan: &Plan,
    task: &Task,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for dep in &task.depends_on {
        let Some(upstream) = plan.task(dep) else { continue };
        if cutoff::why_no_cutoff(upstream).is_some() {
            continue;
        }
        let value = match super::outputs::completed_by(read, goal, revision, dep)? {
            Some(attempt) => {
                let files = read.outputs_of_attempt(attempt)?;
                cutoff::outputs_digest(files.iter().map(|f| (f.path.as_str(), f.digest.as_str(), f.executable)))
            }
            None => "none".to_string(),
        };
        out.insert(cutoff::context_name(dep), value);
    }
    Ok(out)
}

/// Each program's entry as one pass that starts nothing found it (the
/// reuse pass: a thousand tasks of `true` search `PATH` once, not a
/// thousand times). Only for as long as nothing runs.
#[derive(Default)]
pub struct Programs(std::collections::HashMap<String, String>);

impl Programs {
    /// A process ran (a task's context command): what it found may have
    /// changed, so every program is looked up again.
    pub fn forget(&mut self) {
        self.0.clear();
    }
}

/// Who does `task`'s work, as its checkpoint carries it (`decide::reuse::tool`):
/// for a command provider, the file the spawn would execute for its
/// program (found through `PATH` as `execvp` searches it, in the
/// workspace for a relative name) with its digest, and an interpreter's
/// script file (absolute or in the workspace) by its digest. Digests come
/// through `cache`, the file-state cache: an unchanged file (size, mtime,
/// ctime, inode) is not hashed again. Nothing for other providers (an MCP
/// server's identity comes from its listing: `decide::tools::context_of`).
/// A program already looked up in `programs` is taken from it.
pub fn tool_context_in(
    plan: &Plan,
    task: &Task,
    cache: &mut FileCache,
    programs: &mut Programs,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(ProviderSpec::Command { .. }) = plan.file.providers.get(&task.provider) else { return out };
    let Some(argv) = task.action.get("run").and_then(Value::as_array) else { return out };
    let argv: Vec<String> = argv.iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
    let Some(program) = argv.first() else { return out };
    let value = match programs.0.get(program) {
        Some(v) => v.clone(),
        None => {
            let v = program_entry(program, &plan.workspace, cache);
            programs.0.insert(program.clone(), v.clone());
            v
        }
    };
    out.insert(tool::exe_name(program), value);
    if let Some(script) = tool::script_arg(&argv) {
        let path = plan.workspace.join(script);
        // Only a file: an operand that names none is not a script.
        if let Ok(Some(digest)) = cache.digest(&path) {
            out.insert(tool::script_name(script), digest);
        }
    }
    out
}

/// The file `program` names (`resolve`) with its digest.
fn program_entry(program: &str, workspace: &Path, cache: &mut FileCache) -> String {
    match resolve(program, workspace) {
        Some(path) => match cache.digest(&path) {
            Ok(Some(digest)) => format!("{} {digest}", path.display()),
            Ok(None) => format!("{} (absent)", path.display()),
            Err(e) => format!("{} (unreadable: {e})", path.display()),
        },
        None => "(not found)".to_string(),
    }
}

/// The file `execvp` would run for `program` from `workspace` (its
/// working folder): a name with a `/` as it is; else the first regular
/// file with an execute bit along the engine's `PATH` (the one its
/// children inherit), glibc's `/bin:/usr/bin` when there is none.
fn resolve(program: &str, workspace: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return Some(workspace.join(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|dir| match dir.as_os_str().is_empty() {
            true => workspace.join(program),
            false => workspace.join(dir).join(program),
        })
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}
