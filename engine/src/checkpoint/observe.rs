//! Observing a task's checkpoint now: its inputs expanded and hashed
//! (through the file-state cache), its context values read.

use std::collections::BTreeMap;
use std::path::Path;

use providers::sandbox::Sandbox;

use super::{Checkpoint, FileCache};
use crate::limits::{OBSERVE_INLINE_BYTES_MAX, OBSERVE_INLINE_FILES_MAX};
use crate::plan::{ContextSource, Task};
use crate::workspace;

/// Observe a task's checkpoint now, through `cache`. `secrets` are the
/// plan's secret variable names: their values are recorded only as digests.
/// Context commands run in `sandbox`.
pub fn observe(
    workspace_dir: &Path,
    task: &Task,
    secrets: &[String],
    sandbox: &Sandbox,
    cache: &mut FileCache,
) -> Result<Checkpoint, String> {
    // Resolving the workspace costs a `readlink` per path component: only
    // when there is an input to expand under it.
    Ok(observe_with(&mut None, workspace_dir, task, secrets, sandbox, cache)?.hashed(BTreeMap::new()))
}

/// What observing a task read — its files' digests and its context
/// values — before it is hashed into a checkpoint: a caller that adds
/// entries of its own (a tool's identity, an upstream's outputs) hashes
/// the whole once (`hashed`), not once observed and again with them.
#[derive(Debug)]
pub struct Observed {
    files: BTreeMap<String, Option<String>>,
    context: BTreeMap<String, String>,
}

impl Observed {
    /// The checkpoint of what was observed with `extra` context values
    /// added (an `extra` entry replaces an observed one of its name): the
    /// same checkpoint, digest included, as `Checkpoint::with_context`
    /// gives from the observed checkpoint.
    pub fn hashed(self, extra: BTreeMap<String, String>) -> Checkpoint {
        let mut context = self.context;
        context.extend(extra);
        Checkpoint::of(self.files, context)
    }
}

/// As `observe`, through `expander` (made on first need): one `Expander`
/// for a pass over many tasks resolves the workspace and each folder once.
pub fn observe_with(
    expander: &mut Option<workspace::Expander>,
    workspace_dir: &Path,
    task: &Task,
    secrets: &[String],
    sandbox: &Sandbox,
    cache: &mut FileCache,
) -> Result<Observed, String> {
    let expanded = if task.inputs.is_empty() {
        Expanded::default()
    } else {
        let expander = match expander {
            Some(e) => e,
            None => expander.insert(workspace::Expander::new(workspace_dir)?),
        };
        expand_inputs(expander, task).map_err(|(_, why)| why)?
    };
    observe_expanded(expanded, workspace_dir, task, secrets, sandbox, cache)
}

/// A task's inputs expanded to files, each with the metadata its
/// expansion read (`Expander::expand_observed`): what observing them
/// hashes, through the file-state cache.
#[derive(Debug, Default)]
pub struct Expanded(Vec<(String, Option<std::fs::Metadata>)>);

/// Expand every input of `task` through `expander`; an input that cannot
/// be expanded (one leading out of the workspace among them) is refused
/// with its index in `task.inputs`.
pub fn expand_inputs(expander: &mut workspace::Expander, task: &Task) -> Result<Expanded, (usize, String)> {
    let mut files = Vec::with_capacity(task.inputs.len());
    for (j, input) in task.inputs.iter().enumerate() {
        expander.expand_observed(input, &mut files).map_err(|why| (j, why))?;
    }
    Ok(Expanded(files))
}

/// Observe a task's checkpoint from its inputs' expansion (`expand_inputs`)
/// made now, as `observe` does (not yet hashed).
pub fn observe_expanded(
    expanded: Expanded,
    workspace_dir: &Path,
    task: &Task,
    secrets: &[String],
    sandbox: &Sandbox,
    cache: &mut FileCache,
) -> Result<Observed, String> {
    // Each file's full path written into one buffer, and the map built
    // at once from the list (sorted once, not an insert per file).
    let mut path = std::path::PathBuf::new();
    let mut list = Vec::with_capacity(expanded.0.len());
    for (rel, known) in expanded.0 {
        workspace::under_into(&mut path, workspace_dir, &rel);
        let digest = cache.digest_known(&path, known).map_err(|e| format!("cannot read input {rel}: {e}"))?;
        list.push((rel, digest));
    }
    // A path listed twice keeps its last digest, as inserting each did.
    let files: BTreeMap<String, Option<String>> = list.into_iter().collect();
    let mut context = BTreeMap::new();
    for (name, source) in &task.context {
        let value = match source {
            ContextSource::Env { env } => {
                let v = std::env::var(env).unwrap_or_default();
                if secrets.contains(env) {
                    format!("digest:{}", blake3::hash(v.as_bytes()).to_hex())
                } else {
                    v
                }
            }
            ContextSource::Command(argv) => super::context::command_value(workspace_dir, argv, sandbox),
        };
        context.insert(name.clone(), value);
    }
    Ok(Observed { files, context })
}

/// Does observing `task`'s checkpoint start no process (no context
/// command)? `engine run --dry-run` observes only those.
pub fn starts_nothing(task: &Task) -> bool {
    !task.context.values().any(|c| matches!(c, ContextSource::Command(_)))
}

/// Is observing `task` now quick and bounded, so that the coordinator may
/// do it in place? Yes when it has no context command and every input is a
/// literal path (no glob) naming an absent or a regular file, at most
/// `OBSERVE_INLINE_FILES_MAX` of them and `OBSERVE_INLINE_BYTES_MAX` bytes in
/// all. Anything else — a command, a glob, a folder, a large file — is
/// observed off the coordinator. (A thread hop costs more than hashing a few
/// small files.)
pub fn observes_quickly(workspace_dir: &Path, task: &Task) -> bool {
    !task.context.values().any(|c| matches!(c, ContextSource::Command(_)))
        && few_small_files(workspace_dir, &task.inputs)
}

/// Are `paths` at most `OBSERVE_INLINE_FILES_MAX` literal paths (no glob),
/// each naming an absent or a regular file, of `OBSERVE_INLINE_BYTES_MAX`
/// bytes in all? Then hashing them is quicker than a hop to another thread.
pub fn few_small_files(workspace_dir: &Path, paths: &[String]) -> bool {
    if paths.len() > OBSERVE_INLINE_FILES_MAX {
        return false;
    }
    let mut bytes: u64 = 0;
    for path in paths {
        if path.contains(['*', '?', '[']) {
            return false;
        }
        match std::fs::metadata(workspace_dir.join(path)) {
            Ok(m) if m.is_file() => bytes = bytes.saturating_add(m.len()),
            Ok(_) => return false,
            // Absent (or unreadable): nothing to read; observing says so.
            Err(_) => {}
        }
        if bytes > OBSERVE_INLINE_BYTES_MAX {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn task(extra: Value) -> Task {
        let mut t = json!({"ref": "T", "provider": "sh", "action": {"run": ["true"]}});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        serde_json::from_value(t).unwrap()
    }

    #[test]
    fn only_a_few_small_literal_files_are_observed_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        std::fs::create_dir(ws.join("folder")).unwrap();
        std::fs::write(ws.join("big.bin"), vec![0u8; OBSERVE_INLINE_BYTES_MAX as usize + 1]).unwrap();
        assert!(observes_quickly(ws, &task(json!({}))));
        assert!(observes_quickly(ws, &task(json!({"inputs": ["a.txt", "not-yet.txt"]}))));
        assert!(observes_quickly(ws, &task(json!({"context": {"who": {"env": "USER"}}}))));
        assert!(!observes_quickly(ws, &task(json!({"inputs": ["*.txt"]}))), "a glob may match many");
        assert!(!observes_quickly(ws, &task(json!({"inputs": ["folder"]}))), "a folder may hold many");
        assert!(!observes_quickly(ws, &task(json!({"inputs": ["big.bin"]}))), "past the bytes bound");
        let many: Vec<String> = (0..=OBSERVE_INLINE_FILES_MAX).map(|i| format!("f{i}")).collect();
        assert!(!observes_quickly(ws, &task(json!({"inputs": many}))), "past the files bound");
        assert!(!observes_quickly(ws, &task(json!({"context": {"rev": ["git", "rev-parse", "HEAD"]}}))), "a command");
    }

    /// Hashing once with the added entries gives the checkpoint, digest
    /// and all, that hashing the observation and then adding them gave:
    /// every recorded checkpoint stays comparable.
    #[test]
    fn an_observation_hashed_with_extra_entries_is_the_checkpoint_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        let t = task(json!({"inputs": ["a.txt", "absent.txt"], "context": {"home": {"env": "HOME"}}}));
        let sandbox = Sandbox::disabled();
        let extra: BTreeMap<String, String> =
            [("tool:sh", "x"), ("home", "replaced")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut cache = FileCache::default();
        let before = observe(ws, &t, &[], &sandbox, &mut cache).unwrap().with_context(extra.clone());
        let once = observe_with(&mut None, ws, &t, &[], &sandbox, &mut cache).unwrap().hashed(extra);
        assert_eq!(once, before);
        assert_eq!(once.context.get("home").map(String::as_str), Some("replaced"));
        assert_eq!(once.files.len(), 2);
        // Pinned: the digest the code before the single hashing computed
        // (checked on 1c3e632); a change to its bytes would make every
        // recorded checkpoint stale, which this test names rather than hides.
        assert_eq!(once.digest.to_string(), "9b7e0549e4d9fd3a885f6c4cc3da842c267f5a29711df203c5b75b8cb46f9e4c");
        let bare = observe(ws, &t, &[], &sandbox, &mut cache).unwrap();
        assert_ne!(once.digest, bare.digest, "the extra entries are in the digest");
        let none = observe_with(&mut None, ws, &t, &[], &sandbox, &mut cache).unwrap().hashed(BTreeMap::new());
        assert_eq!(none, bare);
    }

    /// The engine's own protected paths in a plain workspace (its plan
    /// file, an absent `.engine`) are looked at in place; a `.git` folder's
    /// hooks, or an `.engine` folder, off the coordinator.
    #[test]
    fn a_plain_workspace_s_protected_paths_are_few_small_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("plan.json"), "{}").unwrap();
        let paths = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(few_small_files(ws, &paths(&["plan.json", ".engine"])));
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        assert!(!few_small_files(ws, &paths(&["plan.json", ".git/config", ".git/hooks", ".engine"])));
        std::fs::create_dir(ws.join(".engine")).unwrap();
        assert!(!few_small_files(ws, &paths(&["plan.json", ".engine"])));
    }
}
