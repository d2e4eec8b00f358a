//! The person at the keyboard: runs the plan, and after each stop does
//! what a careful person would until the goal ends — restarts after a
//! crash, settles an unknown outcome from the provider's own delivery log
//! (`ok` if it shows the delivery, `not_run` if not), approves what waits
//! for approval, re-sends what was settled not run or failed retryably.
//!
//! Every engine command goes through `Session::engine`, which asks the
//! session's `arm` how to stop it (the crash sweep arms one command with
//! `ENGINE_CRASH_AFTER_COMMITS`, the soak kills at random times) and
//! records what no command may ever do: exit 70 or 101, print a panic,
//! hang, or die of a SIGKILL nobody armed.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use super::fixtures::Receiver;
use super::kill::{self, Kill};
use super::reference::Instance;

/// Runs of the plan before a session counts as stuck.
const RUNS_MAX: usize = 12;
/// How long the person waits for a delivery to show before deciding it
/// did not happen.
pub const GRACE: Duration = Duration::from_millis(500);

/// One command of the session, as the history prints it.
#[derive(Debug, Clone)]
pub struct Cmd {
    pub no: usize,
    pub args: String,
    pub kill: Kill,
    pub killed: bool,
    pub exit: Option<i32>,
    pub code: Option<String>,
}

impl std::fmt::Display for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{} engine {}", self.no, self.args)?;
        match self.kill {
            Kill::AfterCommits(n) => write!(f, " [ENGINE_CRASH_AFTER_COMMITS={n}]")?,
            Kill::After(d) => write!(f, " [SIGKILL after {} ms]", d.as_millis())?,
            Kill::Never => {}
        }
        if self.killed {
            write!(f, " -> killed (137)")
        } else {
            write!(
                f,
                " -> {}{}",
                self.exit.map_or("?".into(), |c| c.to_string()),
                self.code.as_ref().map_or(String::new(), |c| format!(" {c}"))
            )
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Satisfied,
    Stuck(String),
}

pub struct Session<'a> {
    pub inst: &'a Instance,
    pub rcv: &'a Receiver,
    pub history: Vec<Cmd>,
    pub findings: Vec<String>,
    /// A person's acts by operation: approvals given, retries asked.
    pub approvals: HashMap<String, u32>,
    pub retries: HashMap<String, u32>,
    /// (operation, try) a person settled `not_run`.
    pub settled_not_run: Vec<(String, i64)>,
    pub kills: usize,
    jobs: String,
    arm: Box<dyn FnMut(usize) -> Kill + 'a>,
}

impl<'a> Session<'a> {
    /// `arm(n)` says how to stop the n-th engine command that may write.
    pub fn new(inst: &'a Instance, rcv: &'a Receiver, jobs: usize, arm: impl FnMut(usize) -> Kill + 'a) -> Self {
        Session {
            inst,
            rcv,
            history: Vec::new(),
            findings: Vec::new(),
            approvals: HashMap::new(),
            retries: HashMap::new(),
            settled_not_run: Vec::new(),
            kills: 0,
            jobs: jobs.to_string(),
            arm: Box::new(arm),
        }
    }

    /// Act until the goal is satisfied or nothing a person would do helps.
    pub fn run_to_end(&mut self) -> Ending {
        for _ in 0..RUNS_MAX {
            let jobs = self.jobs.clone();
            let Some((code, report)) = self.engine(&["run", "plan.json", "--jobs", &jobs]) else { continue };
            match code {
                0 => {
                    self.check_satisfied(&report);
                    return Ending::Satisfied;
                }
                3 => self.settle_and_resend(&report),
                4 => self.approve_waiting(&report),
                1 => {
                    if let Err(why) = self.retry_failed(&report) {
                        return Ending::Stuck(why);
                    }
                }
                // Recorded as a finding by `engine`; a person tries again.
                _ => {}
            }
        }
        let last = self.findings.last().map_or(String::new(), |f| format!("; the last finding: {f}"));
        Ending::Stuck(format!("the goal did not end after {RUNS_MAX} runs{last}"))
    }

    /// Run one engine command that may write; `None` if it was killed (or
    /// printed no JSON document). Records what no command may do.
    pub fn engine(&mut self, args: &[&str]) -> Option<(i32, Value)> {
        let no = self.history.len() + 1;
        let kill = (self.arm)(no);
        let ran = kill::run(&self.inst.ws, args, kill);
        let doc: Option<Value> = serde_json::from_str(&ran.out.stdout).ok();
        let code =
            doc.as_ref().and_then(|d| d.get("code").or_else(|| d.pointer("/error/code"))).and_then(Value::as_str);
        let cmd = Cmd {
            no,
            args: args.join(" "),
            kill,
            killed: ran.out.killed(),
            exit: ran.out.exit(),
            code: code.map(str::to_string),
        };
        let what = format!("{cmd}");
        self.history.push(cmd);
        if ran.hung {
            self.finding(format!("{what}: still running after {:?} (hung)", kill::DEADLINE));
        }
        if ran.out.stderr.contains("panicked") || ran.out.exit() == Some(101) {
            self.finding(format!("{what}: panicked: {}", panic_message(&ran.out.stderr)));
            return None;
        }
        if ran.out.killed() {
            if !ran.crashed_as_armed(kill) && !ran.hung {
                self.finding(format!("{what}: died of a SIGKILL nobody armed\n{}", ran.out.stderr));
            }
            self.kills += 1;
            return None;
        }
        match ran.out.exit() {
            Some(70) | None => {
                let message = doc.as_ref().and_then(|d| d.pointer("/error/message")).and_then(Value::as_str);
                self.finding(format!(
                    "{what}: exit {:?}: {}",
                    ran.out.exit(),
                    message.map_or_else(|| ran.out.stderr.trim().to_string(), str::to_string)
                ));
            }
            _ => {}
        }
        match doc {
            Some(d) => Some((ran.out.exit().unwrap_or(-1), d)),
            None => {
                self.finding(format!("{what}: stdout is not one JSON document: {:?}", ran.out.stdout));
                None
            }
        }
    }

    pub fn finding(&mut self, what: String) {
        self.findings.push(what);
    }

    /// Exit 0 claims the goal is met: nothing unknown, unsettled or waiting.
    fn check_satisfied(&mut self, report: &Value) {
        let empty = |k: &str| report[k].as_array().is_none_or(Vec::is_empty);
        let mut wrong = Vec::new();
        if report["goal_state"] != "satisfied" {
            wrong.push(format!("goal_state {}", report["goal_state"]));
        }
        for k in ["unknown", "settled_not_run", "awaiting_approval", "failed"] {
            if !empty(k) {
                wrong.push(format!("{k}: {}", report[k]));
            }
        }
        for t in report["tasks"].as_array().into_iter().flatten() {
            if !matches!(t["state"].as_str(), Some("succeeded" | "reused")) {
                wrong.push(format!("task {} is {}", t["task_ref"], t["state"]));
            }
        }
        if !wrong.is_empty() {
            self.finding(format!("exit 0 (satisfied) while {}", wrong.join("; ")));
        }
    }

    /// Settle each unknown outcome from the delivery logs, then re-send
    /// what did not run.
    fn settle_and_resend(&mut self, report: &Value) {
        let mut resend: Vec<String> = strings(&report["settled_not_run"]);
        for u in report["unknown"].as_array().into_iter().flatten() {
            let (Some(op), Some(try_no)) = (u["operation_id"].as_str(), u["try_no"].as_i64()) else { continue };
            let delivered = self.inst.delivered_within(self.rcv, op, try_no, GRACE);
            let (outcome, note) = if delivered {
                ("ok", format!("the provider's own log shows try {try_no}"))
            } else {
                ("not_run", format!("the provider's own log has no try {try_no} after {} ms", GRACE.as_millis()))
            };
            let Some((code, _)) = self.engine(&["settle", op, "--outcome", outcome, "--note", &note]) else { return };
            if code != 0 {
                self.finding(format!("settle {op} --outcome {outcome} refused (exit {code})"));
                return;
            }
            if !delivered {
                self.settled_not_run.push((op.to_string(), try_no));
                if !resend.iter().any(|r| r == op) {
                    resend.push(op.to_string());
                }
            }
        }
        for op in resend {
            if !self.resend(&op) {
                return;
            }
        }
    }

    /// `engine retry OP`, approving it first if the engine asks for that.
    /// False if a command was killed (the caller restarts with a run).
    fn resend(&mut self, op: &str) -> bool {
        for _ in 0..2 {
            *self.retries.entry(op.to_string()).or_default() += 1;
            let jobs = self.jobs.clone();
            let Some((code, report)) = self.engine(&["retry", op, "--jobs", &jobs]) else { return false };
            let waits = report["awaiting_approval"].as_array().into_iter().flatten().any(|a| a["operation_id"] == op);
            if code != 4 || !waits {
                return true;
            }
            if !self.approve(op) {
                return false;
            }
        }
        true
    }

    fn approve_waiting(&mut self, report: &Value) {
        for a in report["awaiting_approval"].as_array().into_iter().flatten() {
            let Some(op) = a["operation_id"].as_str() else { continue };
            if !self.approve(op) {
                return;
            }
        }
    }

    fn approve(&mut self, op: &str) -> bool {
        *self.approvals.entry(op.to_string()).or_default() += 1;
        match self.engine(&["approve", op, "--note", "checked: send it"]) {
            None => false,
            Some((0, _)) => true,
            Some((code, _)) => {
                self.finding(format!("approve {op} refused (exit {code})"));
                false
            }
        }
    }

    /// Retry what failed for a reason a retry can cure; anything else is
    /// not a person's routine act, and ends the session.
    fn retry_failed(&mut self, report: &Value) -> Result<(), String> {
        let failed = strings(&report["failed"]);
        if failed.is_empty() {
            return Err(format!("exit 1 with no failed task (acceptance: {})", report["acceptance"]));
        }
        for r in failed {
            let line = report["tasks"].as_array().into_iter().flatten().find(|t| t["task_ref"] == r.as_str());
            let class = line.and_then(|t| t["class"].as_str()).unwrap_or("?");
            if !matches!(class, "provider_unavailable" | "timeout" | "killed" | "environment") {
                let why = line.and_then(|t| t["why"].as_str()).unwrap_or("?");
                return Err(format!("task {r} failed: {class} ({why})"));
            }
            let op = self.inst.op_of(&r).ok_or(format!("no task {r}"))?.to_string();
            if !self.resend(&op) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The history, one command a line (for a finding's reproduction).
    pub fn transcript(&self) -> String {
        self.history.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n")
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// The panic's place and message (the two lines after `panicked at`),
/// without the backtrace.
fn panic_message(stderr: &str) -> String {
    let from = stderr.find("panicked at").unwrap_or(0);
    stderr[from..].lines().take(2).collect::<Vec<_>>().join(" ")
}
