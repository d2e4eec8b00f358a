//! The sandboxes of one run (docs/sandbox.md): a Landlock policy per
//! provider, built and prepared once when the command starts — before the
//! store is written — and applied to every process the run starts:
//!
//! | processes | policy |
//! | --- | --- |
//! | a provider's (command, agent, MCP server) | the workspace, the temporary folder and its declared `write` paths; or none at all when the plan says `"sandbox": "none"` |
//! | a task's validations | the same as its provider's, but always confined |
//! | acceptance checks, context commands | the workspace and the temporary folder |
//!
//! Every policy protects the store's folder: a policy that would make it
//! writable (a store inside the workspace, a declared path around it) is
//! refused before anything runs, naming both paths.

use std::collections::BTreeMap;
use std::path::Path;

use providers::sandbox::{Kernel, Origin, Policy, PolicyBuilder, PolicyError, Sandbox, Status, Unavailable};

use crate::error::{Code, Error, Result};
use crate::plan::Plan;

/// The testing aid that simulates a kernel without Landlock.
pub const TESTING_AID: &str = "ENGINE_SANDBOX";

pub struct Sandboxes {
    checks: Sandbox,
    providers: BTreeMap<String, Sandbox>,
    validations: BTreeMap<String, Sandbox>,
}

impl Sandboxes {
    /// Before anything is written: can every policy of `plan` be built
    /// with the store at `store` protected (no store where a provider may
    /// write, no bad declared path)? Preparing them (which also checks the
    /// store's files have one name each) waits for the lease, when no other
    /// engine is making the store.
    pub fn check(plan: &Plan, store: &Path) -> Result<()> {
        let mut all: Vec<(Option<&str>, &[String])> = vec![(None, &[])];
        all.extend(plan.file.providers.iter().map(|(name, spec)| (Some(name.as_str()), spec.declared_writes())));
        for (name, declared) in all {
            policy(plan, store, declared)?.build().map_err(|e| refused(e, name, declared, store))?;
        }
        Ok(())
    }

    /// Every policy of `plan`, protecting the folder of the store at
    /// `store`, prepared on this machine's kernel. Says once on stderr when
    /// the kernel confines less than everything.
    pub fn prepare(plan: &Plan, store: &Path) -> Result<Sandboxes> {
        let kernel = kernel()?;
        let build = |name: Option<&str>, declared: &[String]| -> Result<Sandbox> {
            let policy = policy(plan, store, declared)?.build().map_err(|e| refused(e, name, declared, store))?;
            let mut tries = 0;
            loop {
                match policy.prepare_on(kernel) {
                    Err(e) if tries < MAKER_WAITS && is_makers_second_name(&e, store) => {
                        tries += 1;
                        std::thread::sleep(MAKER_WAIT);
                    }
                    prepared => return prepared.map_err(|e| refused(e, name, declared, store)),
                }
            }
        };
        let checks = build(None, &[])?;
        let mut providers = BTreeMap::new();
        let mut validations = BTreeMap::new();
        for (name, spec) in &plan.file.providers {
            let declared = spec.declared_writes();
            let own = if declared.is_empty() { checks.clone() } else { build(Some(name), declared)? };
            let provider = if spec.unconfined() { Sandbox::disabled() } else { own.clone() };
            providers.insert(name.clone(), provider);
            validations.insert(name.clone(), own);
        }
        say_if_weaker(checks.status());
        Ok(Sandboxes { checks, providers, validations })
    }

    /// The sandbox of `provider`'s processes.
    pub fn provider(&self, provider: &str) -> Sandbox {
        self.providers.get(provider).cloned().unwrap_or_else(|| self.checks.clone())
    }

    /// The sandbox of the validations of a task done by `provider`.
    pub fn validation(&self, provider: &str) -> Sandbox {
        self.validations.get(provider).cloned().unwrap_or_else(|| self.checks.clone())
    }

    /// The sandbox of acceptance checks and context commands.
    pub fn checks(&self) -> Sandbox {
        self.checks.clone()
    }

    /// This machine's sandbox, as a confined process gets it.
    pub fn machine(&self) -> &Status {
        self.checks.status()
    }
}

/// The policy of a process of `plan` that may write `declared`, with the
/// folder of the store at `store` protected. A shared store
/// (`postgres://…`) is not a path: no folder of this machine holds it, so
/// there is nothing to protect and no overlap to refuse.
fn policy(plan: &Plan, store: &Path, declared: &[String]) -> Result<PolicyBuilder> {
    let mut b = Policy::builder(&plan.workspace);
    if !crate::store::is_shared(store) {
        b = b.protect(std::path::absolute(store)?.parent().map(Path::to_path_buf).unwrap_or_default());
    }
    for w in declared {
        b = b.write(w);
    }
    Ok(b)
}

/// How long to wait for an engine that is making the store to drop the
/// temporary second name of its file (it links the new store into place,
/// then unlinks the temporary name): a moment, never a stuck maker.
const MAKER_WAIT: std::time::Duration = std::time::Duration::from_millis(25);
const MAKER_WAITS: u32 = 40;

/// A second name the sandbox refuses while a store maker's temporary name
/// is beside the file: the maker links `engine.db.new-PID-MS` into place as
/// `engine.db`, and `engine.db.mark.new-PID-MS` as `engine.db.mark`, then
/// unlinks the temporary name, by itself. Both files count: an engine that
/// prepares its sandboxes between the mark's link and unlink saw the mark
/// with two names and refused to start.
fn is_makers_second_name(e: &PolicyError, store: &Path) -> bool {
    let (PolicyError::HardLinked { path, .. }, Ok(store)) = (e, std::path::absolute(store)) else { return false };
    let (Some(dir), Some(file)) = (store.parent(), path.file_name()) else { return false };
    let prefix = format!("{}.new-", file.to_string_lossy());
    let maker_beside = std::fs::read_dir(dir)
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with(&prefix)))
        .unwrap_or(false);
    maker_beside && path.parent() == Some(dir)
}

/// The kernel this run confines on (`ENGINE_SANDBOX=unavailable`: as if it
/// had no Landlock, so the unconfined path can be tested anywhere).
fn kernel() -> Result<Kernel> {
    match std::env::var(TESTING_AID).ok().as_deref() {
        None | Some("") => Ok(providers::sandbox::kernel()),
        Some("unavailable") => Ok(Kernel::Unavailable(Unavailable::NotEnabled)),
        Some(other) => Err(Error::usage(format!(
            "{TESTING_AID}={other:?}: the only value is `unavailable` (a testing aid: run as if the kernel had no Landlock)"
        ))),
    }
}

/// This machine's sandbox status, without preparing any policy (for
/// `engine status`).
pub fn machine_status() -> Result<Status> {
    Ok(kernel()?.confined_status())
}

/// Once per run: what the kernel does not confine.
fn say_if_weaker(status: &Status) {
    match status {
        Status::Enforced { .. } | Status::Disabled => {}
        Status::Partial { .. } => {
            eprintln!("engine: the provider sandbox is {status}; see docs/sandbox.md")
        }
        Status::Unavailable { .. } => eprintln!(
            "engine: the provider sandbox is {status}: provider processes run unconfined and could write the store; every attempt records it (docs/sandbox.md)"
        ),
    }
}

/// A policy that cannot be built or prepared, as an error a person can act
/// on: a bad declared path is the plan's (`PLAN_INVALID` at its place); a
/// store where providers may write is the store's place (exit 2, naming both
/// paths and how to move it).
fn refused(e: PolicyError, provider: Option<&str>, declared: &[String], store: &Path) -> Error {
    let place = |as_written: &str| {
        let i = declared.iter().position(|w| w == as_written).unwrap_or(0);
        format!("$.providers.{}.sandbox.write[{i}]", provider.unwrap_or("?"))
    };
    match &e {
        PolicyError::BadPath { as_written, .. } => Error::new(Code::PlanInvalid, e.to_string()).at(place(as_written)),
        PolicyError::Overlap { writable, .. } => {
            if let Origin::Declared { as_written } = &writable.origin {
                return Error::new(Code::PlanInvalid, format!("{e}; the store is {}", store.display()))
                    .at(place(as_written));
            }
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let hint = match &writable.origin {
                Origin::Workspace if home.is_some_and(|h| h.starts_with(&writable.path)) => {
                    " The workspace contains your home folder, where the store lives by default: set ENGINE_STORE (or pass --store) to a path outside the workspace."
                }
                _ => " Choose a store outside every folder a provider may write (the workspace, the temporary folder): --store PATH or ENGINE_STORE.",
            };
            Error::usage(format!("the store cannot be protected from provider processes: {e}.{hint}"))
                .at(store.display().to_string())
        }
        PolicyError::HardLinked { .. } | PolicyError::Io { .. } => {
            Error::usage(format!("the provider sandbox cannot be set up: {e}")).at(store.display().to_string())
        }
        PolicyError::Ruleset { .. } => Error::internal(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_makers_temporary_name_of_the_store_or_its_mark_is_waited_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("engine.db");
        let linked = |name: &str| PolicyError::HardLinked { path: dir.path().join(name), links: 2 };
        for name in ["engine.db", "engine.db.mark"] {
            assert!(!is_makers_second_name(&linked(name), &store), "{name}: no maker beside it");
            let tmp = dir.path().join(format!("{name}.new-1-2"));
            std::fs::write(&tmp, b"").unwrap();
            assert!(is_makers_second_name(&linked(name), &store), "{name}: its maker's temporary name");
            std::fs::remove_file(&tmp).unwrap();
        }
        // A maker's name beside another file says nothing about this one.
        std::fs::write(dir.path().join("engine.db.new-1-2"), b"").unwrap();
        assert!(!is_makers_second_name(&linked("engine.db.mark"), &store));
    }
}
