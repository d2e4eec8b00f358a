//! Issue 25 item 3: every `next:` the engine prints is a command that
//! works as printed. For each failure class (and the approval and budget
//! stops) a person walks from the first failure to "goal satisfied"
//! running only the commands the engine printed — pasted into a shell,
//! the text placeholder `"…"` filled in — and fixing the world between
//! steps only where the advice says a person must. At every stop, every
//! printer (`status`, `explain`, the last command's summary, `--json`,
//! the report's buttons) names the same commands.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{json, Value};

use super::common::*;

/// A way out as printed: what a person does first (words), and the command.
#[derive(Debug, Clone)]
struct Way {
    first: Option<String>,
    command: String,
}

/// What the engine advised at one stop: per task (`None`: the goal's own).
#[derive(Debug)]
struct Stop {
    ways: Vec<(Option<String>, Way)>,
    /// The last command's output (a person reads it).
    said: String,
}

impl Stop {
    /// The one advised way whose command holds `part`.
    #[track_caller]
    fn pick(&self, part: &str) -> Way {
        let found: Vec<&Way> = self.ways.iter().map(|(_, w)| w).filter(|w| w.command.contains(part)).collect();
        assert_eq!(found.len(), 1, "one advised `…{part}…` in {:#?}\n{}", self.ways, self.said);
        found[0].clone()
    }
}

/// The goal every walk runs: one acceptance check that passes.
fn walk_plan(providers: Value, tasks: Vec<Value>) -> Value {
    json!({
        "version": 1,
        "goal": {"id": "walk", "statement": "the walk ends satisfied",
                 "acceptance": [{"id": "A1", "statement": "it ran", "check": {"run": ["true"], "expect_exit": 0}}]},
        "providers": providers,
        "tasks": tasks,
    })
}

fn sh_task(task_ref: &str, script: &str) -> Value {
    json!({"ref": task_ref, "title": format!("do {task_ref}"), "provider": "sh",
           "action": {"run": ["sh", "-c", script]}, "effect": "local", "inputs": []})
}

fn sh() -> Value {
    json!({"sh": {"kind": "command"}})
}

/// The line a person pastes: `engine …` run by a shell in the workspace,
/// with the engine under test first on `PATH` and the workspace's
/// environment (its state folder, no stray `ENGINE_*`).
fn paste(ws: &Ws, line: &str) -> Out {
    let template = ws.command(&[]);
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(line).current_dir(&ws.dir);
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ENGINE_") {
            cmd.env_remove(&name);
        }
    }
    let bin = std::path::Path::new(ENGINE).parent().expect("the engine's folder");
    cmd.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
    ws.run_command(cmd)
}

/// The placeholder filled as a person would; nothing else in a printed
/// command is a placeholder.
fn filled(command: &str) -> String {
    for word in ["TEXT", "OPERATION_ID", "REF", "PLAN", "NAME=VALUE", "|", "<", ">"] {
        assert!(!command.contains(word), "`{command}` holds a placeholder `{word}`");
    }
    command.replace("\"…\"", "\"checked by the walk\"")
}

fn ways_of(list: &Value) -> Vec<Way> {
    list.as_array()
        .unwrap_or_else(|| panic!("a list of ways: {list}"))
        .iter()
        .map(|w| Way {
            first: w["first"].as_str().map(str::to_string),
            command: w["command"].as_str().expect("a command").to_string(),
        })
        .collect()
}

/// What every printer advises now, checked to agree.
fn stop(ws: &Ws, last: &Out) -> Stop {
    let status = ws.json(&["status"], 0);
    let mut ways = Vec::new();
    for entry in status["next"].as_array().expect("status --json lists `next`") {
        for w in ways_of(&entry["ways"]) {
            ways.push((entry["task_ref"].as_str().map(str::to_string), w));
        }
    }
    assert!(!ways.is_empty(), "a stop that is not `goal satisfied` names a way out\n{status:#}\n{}", last.describe());
    let text = ws.engine(&["status"]).stdout;
    let report = ws.json(&["report"], 0);
    let buttons: BTreeSet<String> = report["waiting"]
        .as_array()
        .expect("the report's waiting list")
        .iter()
        .flat_map(|w| w["commands"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    for (task_ref, w) in &ways {
        let quoted = format!("`{}`", w.command);
        assert!(text.contains(&quoted), "`engine status` prints {quoted}\n{text}");
        if let Some(first) = &w.first {
            assert!(text.contains(first.as_str()), "`engine status` says first: {first}\n{text}");
        }
        // The last command's own summary (a run, repair, retry, revise)
        // names it too, when it printed one.
        if last.stdout.starts_with("goal ") {
            assert!(last.stdout.contains(&quoted), "the summary prints {quoted}\n{}", last.describe());
        }
        if let Some(r) = task_ref {
            let explain = ws.engine(&["explain", r]);
            assert!(explain.stdout.contains(&quoted), "`engine explain {r}` prints {quoted}\n{}", explain.stdout);
            let j = ws.json(&["explain", r], 0);
            assert!(
                ways_of(&j["next"]).iter().any(|x| x.command == w.command),
                "`engine explain {r} --json` lists {quoted}: {}",
                j["next"]
            );
            // The report's "waiting on a person" buttons copy the same
            // lines (a wait of the task's own: approve, retry, failed, settle).
            if report["waiting"].as_array().unwrap().iter().any(|x| x["task_ref"] == *r) {
                assert!(buttons.contains(&w.command), "a report button copies {quoted}: {buttons:?}");
            }
        }
    }
    Stop { ways, said: format!("{}\n{}", last.stdout, last.stderr) }
}

/// Walk from `first` to "goal satisfied": at each stop `person` looks at
/// the advice, may fix the world, and names the prefix of the printed
/// command to paste. Returns the commands pasted.
fn walk(ws: &Ws, first: &str, mut person: impl FnMut(usize, &Stop) -> &'static str) -> Vec<String> {
    walk_by(ws, first, |step, stop| person(step, stop).to_string())
}

/// `walk`, the person naming a part of the command to paste.
fn walk_by(ws: &Ws, first: &str, mut person: impl FnMut(usize, &Stop) -> String) -> Vec<String> {
    let mut out = paste(ws, first);
    let mut pasted = vec![first.to_string()];
    for step in 0..8 {
        if out.code() == 0 && out.stdout.contains("goal satisfied") {
            ws.verify();
            return pasted;
        }
        let stop = stop(ws, &out);
        let way = stop.pick(&person(step, &stop));
        let line = filled(&way.command);
        out = paste(ws, &line);
        assert!(
            out.code() != 2,
            "a printed command is refused as bad input: `{line}`\n{}\nadvice was {:#?}",
            out.describe(),
            stop.ways
        );
        pasted.push(line);
    }
    panic!("no satisfied goal after 8 steps: {pasted:#?}\n{}", out.describe());
}

/// A plain command failure (the issue's circle): `explain` said "revise",
/// `revise` said "nothing to revise", `retry` wanted an operation id and
/// then "use repair", `repair` wanted `--force --note`. Now the advice is
/// the forced repair once what the command needs is fixed, or a revision
/// once the request is corrected; either leads out.
#[test]
fn provider_rejected_a_plain_command_failure_leads_out_both_ways() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &walk_plan(sh(), vec![sh_task("gate", "test -f ready")]));
    let steps = walk(&ws, "engine run plan.json", |_, stop| {
        let way = stop.pick("engine repair gate");
        assert!(way.command.ends_with("--force --note \"…\""), "{way:?}");
        assert!(way.first.as_deref().is_some_and(|f| f.contains("fix what it needs")), "{way:?}");
        ws.write("ready", "");
        "engine repair gate"
    });
    assert_eq!(steps.len(), 2, "{steps:?}");

    // The other way: the request itself is corrected in the plan.
    let ws = Ws::new();
    ws.write_plan("plan.json", &walk_plan(sh(), vec![sh_task("gate", "test -f ready")]));
    walk(&ws, "engine run plan.json", |_, stop| {
        let way = stop.pick("engine revise plan.json");
        assert!(way.first.as_deref().is_some_and(|f| f.contains("correct task gate's request in plan.json")));
        ws.write_plan("plan.json", &walk_plan(sh(), vec![sh_task("gate", "true")]));
        "engine revise plan.json"
    });
    // And the dead ends of the circle now point out of it.
    let ws = Ws::new();
    ws.write_plan("plan.json", &walk_plan(sh(), vec![sh_task("gate", "test -f ready")]));
    ws.engine(&["run", "plan.json"]).expect_code(1);
    for args in [&["revise", "plan.json", "--reason", "again"][..], &["retry", "gate"], &["repair", "gate"]] {
        let out = ws.engine(args);
        out.expect_code(2);
        assert!(out.stderr.contains("`engine repair gate --force --note \"…\"`"), "{args:?}\n{}", out.describe());
    }
}

/// An agent (agent-json) whose work fails its validation: the repair hands
/// it the failure, and it fixes the work itself: nothing for a person to
/// fix.
#[test]
fn validation_failed_is_repaired_as_printed() {
    let ws = Ws::new();
    ws.write(
        "agent.sh",
        "req=$(cat)\ncase \"$req\" in *'\"repair\":{'*) echo ready > out.txt ;; esac\n\
         echo '{\"status\": \"done\", \"summary\": \"wrote out.txt\"}'\n",
    );
    let task = json!({"ref": "write", "title": "write out.txt", "provider": "agent",
        "action": {"run": ["sh", "agent.sh"]}, "effect": "local", "inputs": [], "outputs": ["out.txt"],
        "validations": [{"id": "V1", "run": ["grep", "-q", "ready", "out.txt"], "expect_exit": 0}]});
    ws.write_plan("plan.json", &walk_plan(json!({"agent": {"kind": "command", "protocol": "agent-json"}}), vec![task]));
    let steps = walk(&ws, "engine run plan.json", |_, stop| {
        assert_eq!(stop.pick("engine repair write").first, None, "nothing to fix first");
        "engine repair write"
    });
    assert_eq!(steps, ["engine run plan.json", "engine repair write"]);
}

#[test]
fn constraint_violated_is_undone_then_repaired() {
    let ws = Ws::new();
    ws.write("keys", "the keys\n");
    let mut p = walk_plan(sh(), vec![sh_task("tidy", "test -f careful || echo oops >> keys")]);
    p["goal"]["constraints"] = json!([{"id": "C1", "statement": "the keys stay", "protect": ["keys"]}]);
    ws.write_plan("plan.json", &p);
    walk(&ws, "engine run plan.json", |_, stop| {
        let way = stop.pick("engine repair tidy");
        assert!(way.first.as_deref().is_some_and(|f| f.contains("put back any protected path")), "{way:?}");
        ws.write("keys", "the keys\n");
        ws.write("careful", "");
        "engine repair tidy"
    });
}

#[test]
fn killed_is_retried_as_printed() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &walk_plan(sh(), vec![sh_task("calm", "test -f calm || kill -9 $$")]));
    walk(&ws, "engine run plan.json", |_, _| {
        ws.write("calm", "");
        "engine retry calm"
    });
}

#[test]
fn timeout_is_retried_as_printed() {
    let ws = Ws::new();
    let mut t = sh_task("slow", "test -f fast || sleep 30");
    t["timeout_seconds"] = json!(1);
    ws.write_plan("plan.json", &walk_plan(sh(), vec![t]));
    walk(&ws, "engine run plan.json", |_, stop| {
        assert!(stop.said.contains("timeout"), "{}", stop.said);
        ws.write("fast", "");
        "engine retry slow"
    });
}

#[test]
fn environment_is_fixed_then_retried() {
    let ws = Ws::new();
    let t = json!({"ref": "tool", "title": "run the tool", "provider": "sh", "action": {"run": ["./tool.sh"]},
                   "effect": "local", "inputs": []});
    ws.write_plan("plan.json", &walk_plan(sh(), vec![t]));
    walk(&ws, "engine run plan.json", |_, stop| {
        let way = stop.pick("engine retry tool");
        assert!(way.first.as_deref().is_some_and(|f| f.contains("engine explain tool")), "{way:?}");
        let tool = ws.write("tool.sh", "#!/bin/sh\nexit 0\n");
        std::fs::set_permissions(tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        "engine retry tool"
    });
}

/// An agent that reports `failed`: no rule explains it (`unclassified`);
/// a person reads the evidence, fixes it, and repairs with a note.
#[test]
fn unclassified_is_decided_by_a_person() {
    let ws = Ws::new();
    ws.write(
        "agent.sh",
        "cat > /dev/null\nif [ -f fixed ]; then echo '{\"status\": \"done\", \"summary\": \"ok\"}'; \
         else echo '{\"status\": \"failed\", \"summary\": \"no fixed\"}'; fi\n",
    );
    let task = json!({"ref": "agent", "title": "the agent's work", "provider": "agent",
        "action": {"run": ["sh", "agent.sh"]}, "effect": "local", "inputs": []});
    ws.write_plan("plan.json", &walk_plan(json!({"agent": {"kind": "command", "protocol": "agent-json"}}), vec![task]));
    walk(&ws, "engine run plan.json", |_, stop| {
        assert!(stop.said.contains("unclassified"), "{}", stop.said);
        ws.write("fixed", "");
        "engine repair agent"
    });
}

/// The HTTP provider on the receiver fixture, its effect external: every
/// repeat needs a person's approval, which the advice walks through too.
fn http_walk(mode: Value) -> (Receiver, Ws) {
    let rcv = Receiver::start(&[]);
    rcv.control(mode);
    let ws = Ws::new();
    let task = json!({"ref": "post", "title": "post the document", "provider": "r",
        "action": {"body": {"doc": "d"}}, "effect": "external"});
    let providers = json!({"r": {"kind": "http", "endpoint": format!("{}/render", rcv.base())}});
    ws.write_plan("plan.json", &walk_plan(providers, vec![task]));
    (rcv, ws)
}

#[test]
fn provider_unavailable_is_retried_then_approved() {
    let (rcv, ws) = http_walk(json!({"mode": "status", "status": 503, "times": 1}));
    let steps = walk(&ws, "engine run plan.json", |step, stop| match step {
        0 => {
            assert!(stop.said.contains("provider_unavailable"), "{}", stop.said);
            "engine retry post"
        }
        _ => "engine ", // the one way: approve, then the retry that spends it
    });
    assert_eq!(rcv.deliveries().len(), 1, "delivered once: {steps:?}");
    assert!(steps.iter().any(|s| s.starts_with("engine approve ")), "{steps:?}");
}

#[test]
fn effect_unknown_is_settled_not_run_then_retried() {
    let (rcv, ws) = http_walk(json!({"mode": "drop", "times": 1}));
    let steps = walk(&ws, "engine run plan.json", |step, _| match step {
        0 => "--outcome not_run",
        _ => "engine ",
    });
    assert!(steps[1].starts_with("engine settle op_") && steps[1].contains("--outcome not_run"), "{steps:?}");
    assert!(!rcv.deliveries().is_empty());

    // Settled `ok` instead: a plain run judges it.
    let (_rcv, ws) = http_walk(json!({"mode": "drop", "times": 1}));
    paste(&ws, "engine run plan.json").expect_code(3);
    let first = stop(&ws, &paste(&ws, "engine status"));
    let ok = first.ways.iter().find(|(_, w)| w.command.contains("--outcome ok")).expect("settle ok").1.clone();
    paste(&ws, &filled(&ok.command)).expect_code(0);
    let then = stop(&ws, &paste(&ws, "engine status"));
    let run = then.pick("engine run plan.json");
    let out = paste(&ws, &run.command);
    assert!(out.code() == 0 && out.stdout.contains("goal satisfied"), "{}", out.describe());
}

#[test]
fn an_approval_stop_is_approved_then_spent() {
    let ws = Ws::new();
    let mut t = sh_task("pay", "true");
    t["requires_approval"] = json!(true);
    ws.write_plan("plan.json", &walk_plan(sh(), vec![t]));
    let steps = walk(&ws, "engine run plan.json", |step, _| match step {
        0 => "engine approve op_",
        _ => "engine run plan.json",
    });
    assert_eq!(steps.len(), 3, "{steps:?}");
}

#[test]
fn a_budget_stop_is_raised() {
    let ws = Ws::new();
    let mut p = walk_plan(sh(), vec![sh_task("one", "true"), sh_task("two", "true")]);
    p["budgets"] = json!({"max_provider_calls": 1});
    ws.write_plan("plan.json", &p);
    let steps = walk(&ws, "engine run plan.json", |_, stop| {
        assert!(stop.said.contains("BUDGET_EXHAUSTED"), "{}", stop.said);
        "engine revise plan.json"
    });
    assert!(steps[1].contains("--raise max_provider_calls=2"), "{steps:?}");
}

/// Every task completed, but the goal's own check failed: fix the world,
/// run again.
#[test]
fn a_failed_acceptance_check_is_fixed_then_run_again() {
    let ws = Ws::new();
    let mut p = walk_plan(sh(), vec![sh_task("one", "true")]);
    p["goal"]["acceptance"][0]["check"] = json!({"run": ["test", "-f", "accepted"], "expect_exit": 0});
    ws.write_plan("plan.json", &p);
    walk(&ws, "engine run plan.json", |_, stop| {
        let way = stop.pick("engine run plan.json");
        assert!(way.first.as_deref().is_some_and(|f| f.contains("fix what the failed check found")), "{way:?}");
        ws.write("accepted", "");
        "engine run plan.json"
    });
}
