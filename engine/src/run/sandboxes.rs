//! The sandboxes of one run (docs/sandbox.md): a Landlock policy per
//! provider (and per task that declares a network or variables of its
//! own), built and prepared once when the command starts — before the
//! store is written — and applied to every process the run starts:
//!
//! | processes | files | network, environment |
//! | --- | --- | --- |
//! | a provider's (command, agent, MCP server) | the workspace, the temporary folder and its declared `write` paths; or none at all when the plan says `"sandbox": "none"` | its provider's `network` and `env`, and its task's |
//! | a task's validations | the same as its provider's, but always confined | the same as the task's |
//! | acceptance and constraint checks, context commands | the workspace and the temporary folder | none; the minimal set |
//!
//! Every policy protects the store's folder: a policy that would make it
//! writable (a store inside the workspace, a declared path around it) is
//! refused before anything runs, naming both paths. The run's namespaces
//! (`providers::sandbox::namespaces`) are made here too: the network
//! namespace of processes that may have no network, and the mount
//! namespace in which the store's folder and the stores' root are empty.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use providers::sandbox::{
    AfterOnly, Kernel, Namespaces, NetStatus, NsStatus, Origin, Policy, PolicyBuilder, PolicyError, Sandbox, Status,
    Unavailable, WriteRule, Writes, WritesBy,
};

use crate::decide::sandbox_rules::{self, Guarded, Place, Rule};
use crate::decide::write_grants::{self, Found, Grants};
use crate::error::{Code, Error, Result};
use crate::plan::model::{ProviderSpec, Task};
use crate::plan::reach::Reach;
use crate::plan::Plan;
use crate::store::access::Confinement;
use crate::store::LeaseGuard;

/// Workspace paths a task's process may write, each with its declared line
/// (`decide::write_grants`).
type Rules = Vec<(String, String)>;

/// The testing aid that simulates a kernel without Landlock.
pub const TESTING_AID: &str = "ENGINE_SANDBOX";

pub struct Sandboxes {
    checks: Sandbox,
    providers: BTreeMap<String, Sandbox>,
    validations: BTreeMap<String, Sandbox>,
    /// Tasks that declare more than their provider: (their command's,
    /// their validations').
    tasks: HashMap<String, (Sandbox, Sandbox)>,
}

impl Sandboxes {
    /// Before anything is written: can every policy of `plan` be built
    /// with the store at `store` protected (no store where a provider may
    /// write, no bad declared path)? Preparing them (which also checks the
    /// store's files have one name each) waits for the lease, when no other
    /// engine is making the store.
    pub fn check(plan: &Plan, store: &Path) -> Result<()> {
        refuse_rules(plan, Some(store))?;
        let mut all: Vec<(Option<&str>, &[String])> = vec![(None, &[])];
        all.extend(plan.file.providers.iter().map(|(name, spec)| (Some(name.as_str()), spec.declared_writes())));
        for (name, declared) in all {
            policy(plan, store, declared)?.build().map_err(|e| refused(e, name, declared, store))?;
        }
        Ok(())
    }

    /// Every policy of `plan`, protecting the folder of the store at
    /// `store`, prepared on this machine's kernel in the run's namespaces
    /// (made here: the store's folder and the stores' root hidden). Says
    /// once on stderr when the kernel confines less than everything.
    pub fn prepare(plan: &Plan, store: &Path) -> Result<Sandboxes> {
        let kernel = kernel()?;
        let namespaces = match kernel {
            // The testing aid's machine has no namespaces either: the
            // unconfined path, whole.
            Kernel::Unavailable(_) if std::env::var_os(TESTING_AID).is_some() => {
                Namespaces::unavailable(&format!("simulated by {TESTING_AID}=unavailable, a testing aid"))
            }
            _ => namespaces(store),
        };
        let maker = Maker { plan, store, kernel, namespaces: &namespaces };
        let build = |name: Option<&str>, declared: &[String], reach: &Reach, beneath: Option<&Rules>| {
            maker.build(name, declared, reach, beneath)
        };
        let checks = build(None, &[], &Reach::default(), None)?;
        let mut providers = BTreeMap::new();
        let mut validations = BTreeMap::new();
        for (name, spec) in &plan.file.providers {
            let reach = Reach::of_provider(spec);
            let own = build(Some(name), spec.declared_writes(), &reach, None)?;
            let provider = if spec.unconfined() { Sandbox::disabled().with_env(&reach.env) } else { own.clone() };
            providers.insert(name.clone(), provider);
            validations.insert(name.clone(), own);
        }
        let tasks = maker.tasks(&providers, &validations)?;
        say_if_weaker(&checks);
        Ok(Sandboxes { checks, providers, validations, tasks })
    }

    /// The sandbox of `provider`'s processes (an MCP server's).
    pub fn provider(&self, provider: &str) -> Sandbox {
        self.providers.get(provider).cloned().unwrap_or_else(|| self.checks.clone())
    }

    /// The sandbox of `task`'s command.
    pub fn task(&self, task: &Task) -> Sandbox {
        match self.tasks.get(&task.task_ref) {
            Some((command, _)) => command.clone(),
            None => self.provider(&task.provider),
        }
    }

    /// The sandbox of `task`'s validations.
    pub fn validation(&self, task: &Task) -> Sandbox {
        match self.tasks.get(&task.task_ref) {
            Some((_, validations)) => validations.clone(),
            None => self.validations.get(&task.provider).cloned().unwrap_or_else(|| self.checks.clone()),
        }
    }

    /// The sandbox of acceptance checks and context commands.
    pub fn checks(&self) -> Sandbox {
        self.checks.clone()
    }

    /// This machine's sandbox, as a confined process gets it.
    pub fn machine(&self) -> &Status {
        self.checks.status()
    }

    /// What this engine confines its providers with, part by part, and why
    /// each part it lacks is missing.
    fn confinement(&self) -> (Confinement, Vec<(&'static str, String)>) {
        let mut why = Vec::new();
        let landlock = self.checks.status().is_confined();
        if !landlock {
            why.push(("landlock", format!("Landlock: {}", self.checks.status())));
        }
        let cgroup = providers::command::cgroups_unavailable();
        if let Some(reason) = &cgroup {
            why.push((
                "cgroup",
                format!("no cgroup of their own ({reason}): a `setsid` descendant outlives its attempt"),
            ));
        }
        let stores_hidden = *self.checks.stores() == NsStatus::Hidden;
        if !stores_hidden {
            why.push(("stores_hidden", format!("the stores {}", self.checks.stores())));
        }
        let network_namespace = matches!(self.checks.network(), NetStatus::Enforced { .. });
        if !network_namespace {
            why.push(("network_namespace", format!("no network namespace (the network {})", self.checks.network())));
        }
        (Confinement { landlock, cgroup: cgroup.is_none(), stores_hidden, network_namespace }, why)
    }

    /// On a store shared with a group, every person's run confines its
    /// providers as the store's owner's engine does (recorded in the store's
    /// mark by the owner's own runs), or is refused before anything runs or
    /// is recorded, naming each part it lacks and why: never weaker in
    /// silence. Nothing to hold on a store that is its owner's alone.
    pub fn hold_to_shared(&self, ledger: &mut LeaseGuard) -> Result<()> {
        if !ledger.shared_with_group() {
            return Ok(());
        }
        let (ours, why) = self.confinement();
        let Some(required) = ledger.shared_confinement(ours)? else { return Ok(()) };
        let missing = ours.missing(&required);
        if missing.is_empty() {
            return Ok(());
        }
        let words: Vec<&str> =
            why.iter().filter(|(part, _)| missing.contains(part)).map(|(_, words)| words.as_str()).collect();
        Err(Error::usage(format!(
            "this engine (uid {}) cannot confine providers as the store's owner's engine does on this shared store: \
             {}. Nothing was run or recorded: the same confinement for every person. The store's owner can run \
             it, or give this user what is missing (a cgroup subtree delegated to the user; the namespaces need \
             root) — docs/store.md, \"A store shared with a group\"",
            crate::store::access::current_uid(),
            words.join("; ")
        ))
        .at(ledger.path().display().to_string())
        .with_details(serde_json::json!({"reason": "weaker_confinement", "missing": missing})))
    }
}

/// What makes a run's sandboxes: its plan, store, kernel and namespaces.
struct Maker<'a> {
    plan: &'a Plan,
    store: &'a Path,
    kernel: Kernel,
    namespaces: &'a Namespaces,
}

impl Maker<'_> {
    /// The prepared sandbox of a process of provider `name` (`None`: a
    /// check's) that may write `declared`, reach `reach` and, when
    /// `beneath`, of the workspace only those paths.
    fn build(
        &self,
        name: Option<&str>,
        declared: &[String],
        reach: &Reach,
        beneath: Option<&Rules>,
    ) -> Result<Sandbox> {
        let (plan, store) = (self.plan, self.store);
        let mut policy = policy(plan, store, declared)?.network(reach.network());
        if let Some(rules) = beneath {
            policy = policy.only_beneath(rules.iter().map(|(p, line)| (plan.workspace.join(p), line.clone())));
        }
        let policy = policy.build().map_err(|e| refused(e, name, declared, store))?;
        let mut tries = 0;
        loop {
            match policy.prepare_on(self.kernel, self.namespaces) {
                Err(e) if tries < MAKER_WAITS && is_makers_second_name(&e, store) => {
                    tries += 1;
                    std::thread::sleep(MAKER_WAIT);
                }
                prepared => {
                    return prepared.map(|s| s.with_env(&reach.env)).map_err(|e| refused(e, name, declared, store))
                }
            }
        }
    }

    /// The tasks' own sandboxes (their command's, their validations'),
    /// beside their providers' (`providers`, `validations`).
    fn tasks(
        &self,
        providers: &BTreeMap<String, Sandbox>,
        validations: &BTreeMap<String, Sandbox>,
    ) -> Result<HashMap<String, (Sandbox, Sandbox)>> {
        let plan = self.plan;
        // A task that declares a network or variables of its own gets
        // sandboxes of its own; tasks that declare the same share them.
        // A confined command's process (spawned per call) may write of the
        // workspace only what its task declares (`decide::write_grants`);
        // tasks with the same grants share that sandbox too.
        let mut tasks = HashMap::with_capacity(plan.file.tasks.len()); // large pairs: never moved by a growth
        let mut made: HashMap<(&str, Reach), (Sandbox, Sandbox)> = HashMap::new();
        let mut narrowed: HashMap<(&str, Reach, Rules), Sandbox> = HashMap::new();
        let (root, covers) = places(plan);
        for task in &plan.file.tasks {
            let Some(spec) = plan.file.providers.get(&task.provider) else { continue };
            let reach = Reach::of_task(task, spec);
            let adds = reach.adds_to(&Reach::of_provider(spec));
            let pair = match made.get(&(task.provider.as_str(), reach.clone())) {
                Some(pair) => pair.clone(),
                None if adds => {
                    let own = self.build(Some(&task.provider), spec.declared_writes(), &reach, None)?;
                    let command =
                        if spec.unconfined() { Sandbox::disabled().with_env(&reach.env) } else { own.clone() };
                    made.entry((task.provider.as_str(), reach.clone())).or_insert((command, own)).clone()
                }
                None => {
                    let (Some(command), Some(own)) = (providers.get(&task.provider), validations.get(&task.provider))
                    else {
                        continue;
                    };
                    (command.clone(), own.clone())
                }
            };
            if !matches!(spec, ProviderSpec::Command { .. }) || spec.unconfined() {
                // One MCP server process serves every task of its provider:
                // no task's outputs can narrow it. Said on its attempts.
                if crate::run::constraints::starts_process(spec) {
                    let why = match spec {
                        ProviderSpec::Mcp { .. } => "one MCP server process serves every task of its provider".into(),
                        _ => format!("its provider `{}` runs with \"sandbox\": \"none\"", task.provider),
                    };
                    let writes = after_only(task, &why);
                    tasks.insert(task.task_ref.clone(), (pair.0.with_writes(writes), pair.1));
                } else if adds {
                    tasks.insert(task.task_ref.clone(), pair);
                }
                continue;
            }
            let grants = grants_of(plan, task, &root);
            let covered = covers.get(task.provider.as_str()).cloned().flatten();
            let command = if covered.is_some() || grants.whole.is_some() {
                pair.0.clone()
            } else {
                let key = (task.provider.as_str(), reach.clone(), grants.rules.clone());
                match narrowed.get(&key) {
                    Some(s) => s.clone(),
                    None => {
                        let s =
                            self.build(Some(&task.provider), spec.declared_writes(), &reach, Some(&grants.rules))?;
                        narrowed.entry(key).or_insert(s).clone()
                    }
                }
            };
            let writes = writes_record(task, &grants, command.status(), covered);
            tasks.insert(task.task_ref.clone(), (command.with_writes(writes), pair.1));
        }
        Ok(tasks)
    }
}

/// `SANDBOX_RULE_REFUSED` for the first declared write rule of `plan` that
/// reaches a cgroup tree, the folder of the store at `store` (when it is a
/// path) or the engine's state folder (`decide::sandbox_rules`): the same
/// answer from `engine check` as from `run`, before anything is written.
/// A rule that cannot be resolved is left to the policy, which names it.
pub fn refuse_rules(plan: &Plan, store: Option<&Path>) -> Result<()> {
    let mut rules = Vec::new();
    for (name, spec) in &plan.file.providers {
        for (index, as_written) in spec.declared_writes().iter().enumerate() {
            if let Ok(path) = providers::sandbox::declared_path(as_written) {
                rules.push(Rule { provider: name, index, as_written, path });
            }
        }
    }
    if rules.is_empty() {
        return Ok(());
    }
    let resolved = |p: &Path| providers::sandbox::resolved(p).ok();
    let mut places: Vec<Place> = providers::process::cgroup::mounts()
        .iter()
        .filter_map(|m| resolved(m))
        .map(|path| Place { what: Guarded::CgroupTree, path })
        .collect();
    let store_folder = store
        .filter(|s| !crate::store::is_shared(s))
        .and_then(|s| std::path::absolute(s).ok())
        .and_then(|s| s.parent().and_then(resolved));
    places.extend(store_folder.map(|path| Place { what: Guarded::StoreFolder, path }));
    let state = crate::store::location::state_home().ok().and_then(|root| root.parent().and_then(resolved));
    places.extend(state.map(|path| Place { what: Guarded::EngineState, path }));
    match sandbox_rules::refused(&rules, &places) {
        Some((rule, why)) => Err(Error::new(Code::SandboxRuleRefused, why).at(rule.place())),
        None => Ok(()),
    }
}

/// The workspace resolved, and for each provider whether it lies where
/// that provider's processes write whole (`covered`): once a run, not once
/// a task.
fn places(plan: &Plan) -> (std::path::PathBuf, HashMap<&str, Option<String>>) {
    let root = plan.workspace.canonicalize().unwrap_or_else(|_| plan.workspace.clone());
    let providers = plan.file.providers.iter();
    (root, providers.map(|(name, spec)| (name.as_str(), covered(plan, spec.declared_writes()))).collect())
}

/// The workspace paths `task`'s process may write: its `outputs` and
/// `may_change` as the kernel can grant them, looked up now.
fn grants_of(plan: &Plan, task: &Task, root: &Path) -> Grants {
    let declared: Vec<String> = task.outputs.iter().chain(&task.may_change).cloned().collect();
    let ws = &plan.workspace;
    let plan_file = plan.source.as_deref().and_then(|p| p.strip_prefix(ws).ok()).and_then(|p| p.to_str());
    let look = |rel: &str| match ws.join(rel).canonicalize() {
        Ok(p) if !p.starts_with(root) || p == root => Found::Outside,
        Ok(p) if p.is_dir() => Found::Folder,
        Ok(_) => Found::File,
        Err(_) => Found::Missing,
    };
    write_grants::grants(&declared, plan_file, &look)
}

/// Why no rule can narrow the workspace when it lies in a folder every
/// process of a provider that declares `declared` may write whole (the
/// temporary folder, a declared write path): Landlock adds rights, it
/// never takes them back. `None` when it does not.
fn covered(plan: &Plan, declared: &[String]) -> Option<String> {
    let ws = plan.workspace.canonicalize().ok()?;
    let temp = providers::sandbox::temp_dirs().into_iter().filter_map(|t| t.canonicalize().ok());
    if let Some(t) = temp.into_iter().find(|t| ws.starts_with(t)) {
        return Some(format!(
            "the workspace lies in the temporary folder {}, which the sandbox lets write whole",
            t.display()
        ));
    }
    let writes = declared.iter().filter_map(|w| providers::sandbox::declared_path(w).ok().map(|p| (w, p)));
    writes
        .into_iter()
        .find(|(_, p)| ws.starts_with(p))
        .map(|(w, _)| format!("the workspace lies in the provider's declared write path {w:?}, writable whole"))
}

/// Every declared line of `task` held only by the check after the attempt.
fn after_only(task: &Task, why: &str) -> Writes {
    let declared = task.outputs.iter().chain(&task.may_change);
    let after_attempt = declared.map(|l| AfterOnly { output: l.clone(), why: why.to_string() }).collect();
    Writes { by: WritesBy::AfterAttempt, rules: Vec::new(), after_attempt }
}

/// What an attempt of `task` records of how its outputs held its writes.
fn writes_record(task: &Task, grants: &Grants, status: &Status, covered: Option<String>) -> Writes {
    let why = match covered {
        _ if !status.is_confined() => Some(format!("the kernel confines nothing here (the sandbox is {status})")),
        covered => covered,
    };
    if let Some(why) = why {
        return after_only(task, &why);
    }
    if let Some((line, why)) = &grants.whole {
        let after_attempt = vec![AfterOnly { output: line.clone(), why: why.clone() }];
        return Writes { by: WritesBy::AfterAttempt, rules: Vec::new(), after_attempt };
    }
    let rules =
        grants.rules.iter().map(|(path, line)| WriteRule { output: line.clone(), path: path.clone() }).collect();
    let after_attempt = grants
        .denied
        .iter()
        .map(|(line, why)| AfterOnly { output: line.clone(), why: format!("not writable at all: {why}") })
        .collect();
    Writes { by: WritesBy::Kernel, rules, after_attempt }
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
/// had no Landlock, and the engine no namespaces, so the unconfined path
/// can be tested anywhere).
fn kernel() -> Result<Kernel> {
    cgroup_aid()?;
    match std::env::var(TESTING_AID).ok().as_deref() {
        None | Some("") => Ok(providers::sandbox::kernel()),
        Some("unavailable") => Ok(Kernel::Unavailable(Unavailable::Simulated)),
        Some(other) => Err(Error::usage(format!(
            "{TESTING_AID}={other:?}: the only value is `unavailable` (a testing aid: run as if the kernel had no Landlock)"
        ))),
    }
}

/// `ENGINE_CGROUP=unavailable`: as if no cgroup could be made (the
/// providers' fallback, tested anywhere); any other value is refused.
fn cgroup_aid() -> Result<()> {
    use providers::process::cgroup::{TESTING_AID as AID, TESTING_AID_VALUE as VALUE};
    match std::env::var(AID).ok().as_deref() {
        None | Some("") | Some(VALUE) => Ok(()),
        Some(other) => Err(Error::usage(format!(
            "{AID}={other:?}: the only value is `{VALUE}` (a testing aid: run as if no cgroup could be made)"
        ))),
    }
}

/// This machine's sandbox status, without preparing any policy (for
/// `engine status`).
pub fn machine_status() -> Result<Status> {
    Ok(kernel()?.confined_status())
}

/// The run's namespaces, hiding the folders of `hidden(store)`. Under the
/// simulator (`sim` builds, a simulated world on this thread), which runs
/// no process in them, the namespaces one simulated engine process made
/// for these folders are kept on the thread and used by the next: making
/// a network namespace and tearing it down in a kernel worker was a tenth
/// of a seed's time, for namespaces nothing joins.
fn namespaces(store: &Path) -> Namespaces {
    let hide = hidden(store);
    if crate::run::world::simulated::active() {
        thread_local! {
            static MADE: std::cell::RefCell<Option<(Vec<PathBuf>, Namespaces)>> = const { std::cell::RefCell::new(None) };
        }
        return MADE.with(|made| {
            let mut made = made.borrow_mut();
            match made.as_ref() {
                Some((for_hide, ns)) if *for_hide == hide => ns.clone(),
                _ => made.insert((hide.clone(), Namespaces::make(&hide))).1.clone(),
            }
        });
    }
    Namespaces::make(&hide)
}

/// The folders no provider may see: the store's own, and the stores'
/// root (every workspace's default store), when they are paths; and the
/// OAuth tokens' folder, whatever the store.
fn hidden(store: &Path) -> Vec<PathBuf> {
    let tokens = providers::oauth::store::TokenStore::default_dir();
    if crate::store::is_shared(store) {
        return tokens.into_iter().collect();
    }
    let own = std::path::absolute(store).ok().and_then(|s| s.parent().map(Path::to_path_buf));
    let root = crate::store::location::state_home().ok();
    own.into_iter().chain(root).chain(tokens).collect()
}

/// Once per run: what the kernel or the privileges do not confine.
fn say_if_weaker(checks: &Sandbox) {
    let network = match checks.network() {
        NetStatus::Unavailable { reason } => Some(format!("not restricted ({reason})")),
        NetStatus::Partial { .. } => {
            Some("restricted by Landlock's TCP rules only (no network namespace: UDP is not restricted)".to_string())
        }
        _ => None,
    };
    if let Some(network) = network {
        crate::say_line!("engine: the providers' network is {network}; every attempt records it (docs/sandbox.md)");
    }
    if let Some(reason) = providers::command::cgroups_unavailable() {
        crate::say_line!(
            "engine: provider processes get no cgroup of their own ({reason}): each is tracked by its process group only, and a descendant that leaves it (setsid) is not ended by a stop, a timeout or a takeover (docs/sandbox.md)"
        );
    }
    if let providers::sandbox::Privileges::Partial { reason } = checks.privileges() {
        crate::say_line!(
            "engine: provider processes get no seccomp filter ({reason}): they hold no capability and no new privileges, but file handles, ptrace and mounts are refused by the missing capabilities only; every attempt records it (docs/sandbox.md)"
        );
    }
    say_if_no_spawner(checks);
    if let NsStatus::Unavailable { reason } = checks.stores() {
        crate::say_line!(
            "engine: the stores are not hidden from providers ({reason}): a provider can read them and change their owner, mode and times; every attempt records it (docs/sandbox.md)"
        );
    }
    let status = checks.status();
    match status {
        Status::Enforced { .. } | Status::Disabled => {}
        Status::Partial { .. } => {
            crate::say_line!("engine: the provider sandbox is {status}; see docs/sandbox.md")
        }
        Status::Unavailable { .. } => crate::say_line!(
            "engine: the provider sandbox is {status}: provider processes run unconfined and could write the store; every attempt records it (docs/sandbox.md)"
        ),
    }
}

/// Where confined processes would be started by the providers' spawner
/// thread (made here, before the run starts) but it could not be made:
/// each then drops its privileges itself.
fn say_if_no_spawner(checks: &Sandbox) {
    // Every process but a `"sandbox": "none"` one drops its privileges,
    // Landlock or not: the spawner thread is asked for all of them.
    if matches!(checks.privileges(), providers::sandbox::Privileges::Disabled) {
        return;
    }
    if let Some(reason) = providers::command::spawner_unavailable() {
        let filter = matches!(checks.privileges(), providers::sandbox::Privileges::Dropped);
        crate::say_line!("{}", no_spawner_line(&reason, filter));
    }
}

/// The line for [`say_if_no_spawner`]: the seccomp filter named only where
/// there is one to install; escaped, as the reason may quote the system.
fn no_spawner_line(reason: &str, filter: bool) -> String {
    let what = if filter {
        "drop their privileges and install their seccomp filter themselves"
    } else {
        "drop their privileges themselves"
    };
    let line = format!(
        "engine: confined provider processes are started by the thread that asks for them and {what} ({reason}); see docs/sandbox.md"
    );
    crate::report::escape::for_terminal(&line).into_owned()
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
                return Error::new(Code::SandboxRuleRefused, format!("{e}; the store is {}", store.display()))
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
    fn the_missing_spawner_thread_is_said_escaped_naming_the_filter_only_where_there_is_one() {
        let line = no_spawner_line("blocking: \u{1b}[2Jgone", true);
        assert!(!line.contains('\u{1b}'), "{line}");
        assert!(line.contains("install their seccomp filter themselves (blocking: "), "{line}");
        let line = no_spawner_line("why", false);
        assert!(line.contains("drop their privileges themselves (why)") && !line.contains("seccomp"), "{line}");
    }

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
