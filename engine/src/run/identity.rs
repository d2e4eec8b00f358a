//! What a task's checkpoint carries beyond its inputs and its MCP tools'
//! listings: each dependency's recorded outputs, by digest, read from the
//! ledger (`decide::reuse::cutoff`), so that a completion stands on the
//! bytes its upstream left and not on the fact that the upstream ran; and
//! who does its work — a command's executable and script, by digest
//! (`decide::reuse::tool`). The run (its observations, its reuse pass, its
//! early cutoff) and `engine revise` add the same entries, so a recorded
//! checkpoint and one observed now compare.

use std::collections::{BTreeMap, HashMap};
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
///
/// And the file each bare program name resolved to, for the rest of the
/// run, as the spawn remembers it (`providers::spawn::search`,
/// docs/plan.md): taken again while it still is an executable file,
/// searched for again once it is not. So the checkpoint names the file the
/// spawn executes, and a chain of a thousand `true` tasks searches `PATH`
/// once, not before every task.
#[derive(Default)]
pub struct Programs {
    entries: HashMap<String, String>,
    found: HashMap<String, PathBuf>,
}

impl Programs {
    /// A process ran (a task's context command, a task): what it found may
    /// have changed, so every program's entry is made again (the files
    /// found are looked at again before they are taken).
    pub fn forget(&mut self) {
        self.entries.clear();
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
    let value = match programs.entries.get(program) {
        Some(v) => v.clone(),
        None => {
            let v = program_entry(program, &plan.workspace, cache, &mut programs.found);
            programs.entries.insert(program.clone(), v.clone());
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
fn program_entry(
    program: &str,
    workspace: &Path,
    cache: &mut FileCache,
    found: &mut HashMap<String, PathBuf>,
) -> String {
    match resolve(program, workspace, found) {
        // The metadata that found it executable, read just now, is what
        // the cache compares (one `statx`, not two; still one a task:
        // a task may have replaced the file).
        Some((path, meta)) => match cache.digest_known(&path, meta) {
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
/// children inherit), glibc's `/bin:/usr/bin` when there is none. A bare
/// name's file found earlier in the run (`found`) is taken while it still
/// is one, as the spawn takes it; one found through a relative `PATH`
/// entry is not remembered (the spawn does not remember it either).
/// With the file's metadata (followed) when the search read it.
fn resolve(
    program: &str,
    workspace: &Path,
    found: &mut HashMap<String, PathBuf>,
) -> Option<(PathBuf, Option<std::fs::Metadata>)> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    resolve_along(program, workspace, &path, found)
}

/// `resolve` with `path` for `PATH`.
fn resolve_along(
    program: &str,
    workspace: &Path,
    path: &std::ffi::OsStr,
    found: &mut HashMap<String, PathBuf>,
) -> Option<(PathBuf, Option<std::fs::Metadata>)> {
    if program.contains('/') {
        return Some((workspace.join(program), None));
    }
    if let Some(known) = found.get(program) {
        if let Some(meta) = executable(known) {
            return Some((known.clone(), Some(meta)));
        }
    }
    let hit = std::env::split_paths(path).find_map(|dir| {
        let file = workspace.join(&dir).join(program);
        executable(&file).map(|meta| (file, meta, dir.is_absolute()))
    });
    match hit {
        Some((ref file, _, true)) => found.insert(program.to_string(), file.clone()),
        _ => found.remove(program),
    };
    hit.map(|(file, meta, _)| (file, Some(meta)))
}

/// A regular file (followed through links) with an execute bit: its
/// metadata.
fn executable(path: &Path) -> Option<std::fs::Metadata> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).ok().filter(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn program(dir: &Path, mode: u32) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("tool");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        file
    }

    /// Like the spawn (docs/plan.md): the file found is taken again while
    /// it executes, even with one installed since in an earlier folder;
    /// once it no longer executes, the whole search is made again.
    #[test]
    fn a_programs_file_is_remembered_for_the_run_as_the_spawn_remembers_it() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        let path = std::env::join_paths([&a, &b]).unwrap();
        let mut found = HashMap::new();
        // The file found, checked to carry the metadata of that very file
        // (what the cache then compares, without a `statx` of its own).
        let first = |found: &mut HashMap<String, PathBuf>| {
            use std::os::unix::fs::MetadataExt;
            let hit = resolve_along("tool", d.path(), &path, found)?;
            let meta = hit.1.expect("a searched file comes with its metadata");
            assert_eq!(meta.ino(), std::fs::metadata(&hit.0).unwrap().ino());
            Some(hit.0)
        };
        program(&a, 0o644); // not executable: passed over
        let in_b = program(&b, 0o755);
        assert_eq!(first(&mut found), Some(in_b.clone()));
        let in_a = program(&a, 0o755);
        assert_eq!(first(&mut found), Some(in_b.clone()), "remembered while it executes");
        std::fs::set_permissions(&in_b, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(first(&mut found), Some(in_a.clone()), "searched again once it no longer executes");
        std::fs::remove_file(&in_a).unwrap();
        assert_eq!(first(&mut found), None);
        assert!(found.is_empty(), "nothing found, nothing remembered");
        let named = resolve_along("./tool", d.path(), &path, &mut found).unwrap();
        assert_eq!((named.0, named.1.is_none()), (d.path().join("./tool"), true));
        assert!(found.is_empty(), "a name with a `/` is not searched");
    }
}
