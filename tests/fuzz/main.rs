//! The plan fuzzer (issue 9): plans built from their structure and
//! byte-level mutations of real plans, through `check` in-process (the
//! library's `Plan::load`, thousands of cases) and through the binary for
//! a sample (`engine check`, then `engine run` against an existing store).
//! Every case: no panic, no hang (a deadline per case), every rejection a
//! stable code from SPEC with a place, the binary and the library agree,
//! and a rejected plan leaves the store exactly as it was (a digest of
//! every row). Failures found are kept in `corpus/` and run every time.
//!
//! `FUZZ_CASES=N` (default 2,000 per generator in-process) and
//! `FUZZ_BINARY_CASES=N` (default 60 per generator) make a longer run.

mod corpus;
mod gen;
mod props;
mod special_files;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Receiver, Ws};
use crate::support;
use crate::support::kill::{self, Kill};
use crate::support::reference::Instance;

/// SPEC's codes for a plan `check` refuses.
pub const CHECK_CODES: &[&str] = &[
    "GOAL_REQUIRED",
    "PLAN_INVALID",
    "PLAN_CYCLE",
    "UNKNOWN_DEPENDENCY",
    "DUPLICATE_TASK_REF",
    "UNKNOWN_PROVIDER",
    "INPUT_OUTSIDE_WORKSPACE",
];

/// A case that takes longer than this has hung.
pub const CASE_DEADLINE: Duration = Duration::from_secs(10);

/// What `check` made of a plan, in-process.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Accepted,
    Rejected { code: String, place: Option<String> },
    Panicked(String),
    Hung,
}

/// `Plan::load` on `bytes` written as `<dir>/plan.json`, on its own thread
/// with a deadline (a hang must fail the case, not the whole run).
pub fn check_in_process(dir: &Path, bytes: &[u8]) -> Verdict {
    let path = dir.join("plan.json");
    std::fs::write(&path, bytes).expect("write the plan");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let verdict = match std::panic::catch_unwind(|| ::engine::plan::Plan::load(&path, None)) {
            Ok(Ok(_)) => Verdict::Accepted,
            Ok(Err(e)) => Verdict::Rejected { code: e.code.as_str().to_string(), place: e.place },
            Err(p) => Verdict::Panicked(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
        };
        let _ = tx.send(verdict);
    });
    rx.recv_timeout(CASE_DEADLINE).unwrap_or(Verdict::Hung)
}

/// What is wrong with an in-process verdict, if anything.
pub fn judge(v: &Verdict) -> Option<String> {
    match v {
        Verdict::Accepted => None,
        Verdict::Rejected { code, place } if !CHECK_CODES.contains(&code.as_str()) => {
            Some(format!("rejected with {code}, not one of SPEC's plan codes"))
        }
        Verdict::Rejected { code, place: None } => Some(format!("rejected with {code} but names no place")),
        Verdict::Rejected { .. } => None,
        Verdict::Panicked(m) => Some(format!("check panicked: {m}")),
        Verdict::Hung => Some(format!("check still running after {CASE_DEADLINE:?}")),
    }
}

/// A store with a satisfied goal, and its workspace, which fuzzed plans
/// are written into (so `engine run` uses that store).
pub struct Existing {
    pub inst: Instance,
    _rcv: Receiver,
}

impl Existing {
    pub fn start() -> Existing {
        let rcv = Receiver::start(&[]);
        let inst = Instance::new("command", &rcv, "existing");
        inst.ws.run().expect(0, None);
        Existing { inst, _rcv: rcv }
    }

    pub fn goal_id() -> &'static str {
        "ref-command-existing"
    }

    pub fn ws(&self) -> &Ws {
        &self.inst.ws
    }
}

/// Every row of every table, in order: equal digests, equal ledgers.
pub fn ledger_digest(ws: &Ws) -> String {
    support::ledger::row_digest(&ws.store())
}

/// Every program a plan would start is one of the generator's harmless
/// ones (so an accepted plan may be run).
pub fn safe_to_run(plan: &Value) -> bool {
    let mut argvs: Vec<&Value> = Vec::new();
    for t in plan["tasks"].as_array().into_iter().flatten() {
        argvs.push(&t["action"]["run"]);
        argvs.extend(t["validations"].as_array().into_iter().flatten().map(|v| &v["run"]));
    }
    argvs.extend(plan["goal"]["acceptance"].as_array().into_iter().flatten().map(|a| &a["check"]["run"]));
    argvs.extend(plan["providers"].as_object().into_iter().flatten().map(|(_, p)| &p["command"]));
    argvs.into_iter().filter(|a| !a.is_null()).all(|a| a[0].as_str().is_some_and(|p| gen::SAFE_PROGRAMS.contains(&p)))
        && plan["tasks"].as_array().into_iter().flatten().all(|t| t["context"].is_null())
}

/// `engine check` and `engine run` on `bytes` in the existing store's
/// workspace; `Err` says what is wrong. `expected` is the in-process
/// verdict.
pub fn through_the_binary(ex: &Existing, bytes: &[u8], expected: &Verdict) -> Result<(), String> {
    let ws = ex.ws();
    std::fs::write(ws.path("fuzz.json"), bytes).unwrap();
    let checked = kill::run(ws, &["check", "fuzz.json"], Kill::Never);
    let code = stop_code(&checked)?;
    match (expected, checked.out.exit(), &code) {
        (Verdict::Accepted, Some(0), _) => {}
        (Verdict::Rejected { code: want, .. }, Some(2), Some(got)) if got == want => {}
        _ => return Err(format!("engine check exits {:?} {code:?}; in-process: {expected:?}", checked.out.exit())),
    }
    let plan: Option<Value> = serde_json::from_slice(bytes).ok();
    let runnable = plan.as_ref().is_some_and(safe_to_run);
    if *expected == Verdict::Accepted && !runnable {
        return Ok(());
    }
    let before = ledger_digest(ws);
    let ran = kill::run(ws, &["run", "fuzz.json", "--jobs", "2"], Kill::Never);
    let code = stop_code(&ran)?;
    // An MCP server that cannot list its tools (the generator's `false`
    // does not start) stops a run no check could foresee: no call is made,
    // and what the run recorded must verify.
    let no_inventory = code.as_deref() == Some("TOOL_INVENTORY_UNAVAILABLE");
    match ran.out.exit() {
        Some(2) if no_inventory && *expected == Verdict::Accepted => {
            let verified = kill::run(ws, &["verify"], Kill::Never);
            match verified.out.exit() {
                Some(0) => Ok(()),
                c => {
                    Err(format!("after TOOL_INVENTORY_UNAVAILABLE, engine verify exits {c:?}: {}", verified.out.stdout))
                }
            }
        }
        Some(2) => {
            // What check cannot know: an MCP server that cannot tell its
            // tools. The run records that it asked (the `tool_inventory`
            // event), never an intent: the ledger it leaves must verify.
            if *expected == Verdict::Accepted && code.as_deref() == Some("TOOL_INVENTORY_UNAVAILABLE") {
                let verified = kill::run(ws, &["verify"], Kill::Never);
                return match verified.out.exit() {
                    Some(0) => Ok(()),
                    c => Err(format!("after TOOL_INVENTORY_UNAVAILABLE, engine verify exits {c:?}")),
                };
            }
            if *expected == Verdict::Accepted && code.as_deref() != Some("PLAN_CHANGED") {
                return Err(format!("engine run refused with {code:?} a plan check accepted"));
            }
            let after = ledger_digest(ws);
            if after != before {
                return Err(format!("engine run refused the plan ({code:?}) but changed the store"));
            }
            if let Verdict::Rejected { code: want, .. } = expected {
                if code.as_deref() != Some(want.as_str()) {
                    return Err(format!("engine run refused with {code:?}, check with {want}"));
                }
            }
            Ok(())
        }
        Some(0 | 1 | 3 | 4 | 5) if *expected == Verdict::Accepted => {
            let verified = kill::run(ws, &["verify"], Kill::Never);
            match verified.out.exit() {
                Some(0) => Ok(()),
                c => Err(format!("after a run, engine verify exits {c:?}: {}", verified.out.stdout)),
            }
        }
        c => Err(format!("engine run exits {c:?} ({code:?}) on a plan check {expected:?}")),
    }
}

/// The stable code of a `--json` answer; `Err` on a panic, a hang, or an
/// exit outside SPEC's table.
fn stop_code(ran: &kill::Ran) -> Result<Option<String>, String> {
    if ran.hung {
        return Err(format!("still running after {:?}", kill::DEADLINE));
    }
    if ran.out.stderr.contains("panicked") || !matches!(ran.out.exit(), Some(0..=6)) {
        return Err(format!(
            "exit {:?}: {}",
            ran.out.exit(),
            ran.out.stderr.lines().take(3).collect::<Vec<_>>().join(" ")
        ));
    }
    let doc: Value = serde_json::from_str(&ran.out.stdout).map_err(|e| format!("stdout is not JSON ({e})"))?;
    let code = doc.get("code").or_else(|| doc.pointer("/error/code")).and_then(Value::as_str).map(str::to_string);
    if let Some(c) = &code {
        let spec = CHECK_CODES.contains(&c.as_str())
            || [
                "PLAN_CHANGED",
                "EXTERNAL_EFFECT_UNKNOWN",
                "GOAL_OUTCOME_UNPROVEN",
                "APPROVAL_REQUIRED",
                "APPROVAL_STALE",
                "BUDGET_EXHAUSTED",
                "TOOL_INVENTORY_UNAVAILABLE",
            ]
            .contains(&c.as_str());
        if !spec {
            return Err(format!("stops with {c}, not a code SPEC lists for a plan"));
        }
    }
    Ok(code)
}
