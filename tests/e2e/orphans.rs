//! Issue 9, defect 9: providers orphaned by a SIGKILLed engine kept
//! running, so an effect could complete outside the ledger and an
//! effect-`none` task could run again beside its first copy. Now the
//! engine's direct children die with it (PR_SET_PDEATHSIG), the dispatch
//! records each provider's pid, process group and start time, and the
//! next writer ends those groups before it reconciles — never signalling a
//! pid that now belongs to another process.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;

/// `/proc/PID/stat` field 22: the process start time, in clock ticks.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit(')').next().unwrap().split_whitespace().nth(19).unwrap().parse().unwrap()
}

fn pid_file(ws: &Ws, name: &str) -> Option<i32> {
    std::fs::read_to_string(ws.path(name)).ok()?.trim().parse().ok()
}

fn dispatched(ws: &Ws) -> i64 {
    Ledger::try_open(&ws.store())
        .map_or(0, |db| db.attempts().iter().filter(|a| a.state == "dispatched").count() as i64)
}

/// The `data` of each event of `kind`, with its attempt id, in log order.
fn events_of(ws: &Ws, kind: &str) -> Vec<(i64, Value)> {
    events(ws)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| (e["attempt_id"].as_i64().unwrap(), e["data"].clone()))
        .collect()
}

#[test]
fn a_sigkilled_engine_leaves_no_provider_running_and_no_task_twice_at_once() {
    let ws = Ws::new();
    // S's process is the sleep itself (exec): it dies with the engine.
    let s = r#"echo $$ > s.pid; if [ "$ENGINE_TRY" = 1 ]; then exec sleep 30; fi"#;
    // G starts a grandchild; its next try notes whether that one still runs.
    // (A zombie nobody reaped yet runs no more: in a container pid 1 may
    // never reap it.)
    let g = r#"if [ -e g_child.pid ]; then p=$(cat g_child.pid)
                 if [ -r /proc/$p/stat ] && [ "$(sed 's/^.*) //' /proc/$p/stat | cut -c1)" != Z ]; then
                   echo overlap >> overlap; fi; fi
               if [ "$ENGINE_TRY" = 1 ]; then echo $$ > g.pid; sleep 30 & echo $! > g_child.pid; wait; fi"#;
    let (mut s, mut g) = (task("S", &["sh", "-c", s]), task("G", &["sh", "-c", g]));
    s["may_change"] = json!(["s.pid"]);
    g["may_change"] = json!(["g.pid", "g_child.pid", "overlap"]);
    ws.write_plan("plan.json", &plan(vec![s, g]));

    let mut engine = ws.spawn_engine(&["run", "plan.json", "--jobs", "2"]);
    let (s_pid, g_pid, g_child) = wait_for(Duration::from_secs(20), || {
        let pids = (pid_file(&ws, "s.pid")?, pid_file(&ws, "g.pid")?, pid_file(&ws, "g_child.pid")?);
        (dispatched(&ws) == 2).then_some(pids)
    })
    .expect("both providers started and their dispatch recorded");
    let _cleanup = [GroupGuard(s_pid), GroupGuard(g_pid)];

    // The dispatch names each provider process: pid, own group, start time.
    for (attempt, data) in events_of(&ws, "dispatched") {
        let p = &data["process"];
        let pid = p["pid"].as_u64().unwrap_or_else(|| panic!("attempt {attempt}: {data}")) as u32;
        assert!(pid == s_pid as u32 || pid == g_pid as u32, "{data}");
        assert_eq!(p["pgid"], pid, "{data}");
        assert_eq!(p["start_time"], start_time(pid), "{data}");
    }

    assert_eq!(engine.kill9().code(), -libc::SIGKILL);
    // The engine's own children die with it.
    let died = wait_for(Duration::from_secs(5), || (gone(s_pid) && gone(g_pid)).then_some(()));
    assert!(died.is_some(), "providers outlived the engine: S {} G {}", gone(s_pid), gone(g_pid));
    // What they started does not (the platform's signal reaches children
    // only): the next writer must end it.
    assert!(!gone(g_child), "the grandchild {g_child} is expected to outlive the engine");

    let out = ws.engine(&["run", "plan.json", "--jobs", "2", "--json"]);
    out.expect_code(0);
    assert!(gone(g_child), "the takeover ended the grandchild {g_child}");
    assert!(!ws.path("overlap").exists(), "G's next try ran while the first one's grandchild still ran");

    let ended = events_of(&ws, "provider_processes_ended");
    assert_eq!(ended.len(), 2, "{ended:?}");
    let g_end = ended.iter().find(|(_, d)| d["process"]["pid"] == g_pid).expect("G's group was ended");
    assert_eq!(g_end.1["result"]["outcome"], "ended", "{:?}", g_end.1);
    assert_eq!(g_end.1["result"]["pids"], json!([g_child]), "{:?}", g_end.1);
    // Ended before anything reconciled the attempts.
    let log = events(&ws);
    let seq = |kind: &str, attempt: i64| {
        log.iter().find(|e| e["kind"] == kind && e["attempt_id"] == attempt).and_then(|e| e["seq"].as_i64())
    };
    for (attempt, _) in &ended {
        let rerun = seq("rerun_after_restart", *attempt).expect("the in-doubt try was reconciled");
        assert!(seq("provider_processes_ended", *attempt).unwrap() < rerun);
    }
}

#[test]
fn a_recorded_pid_now_used_by_another_process_is_never_signalled() {
    let ws = Ws::new();
    let script = r#"if [ "$ENGINE_TRY" = 1 ]; then exec sleep 30; fi"#;
    ws.write_plan("plan.json", &plan(vec![task("T1", &["sh", "-c", script])]));
    let mut first = ws.command(&["run", "plan.json", "--json"]);
    first.env("ENGINE_FAILPOINT", "after_dispatch");
    assert_eq!(ws.run_command(first).code(), -libc::SIGKILL);

    // An unrelated process, leading its own group; the ledger is made to
    // say the provider had its pid, but started earlier.
    use std::os::unix::process::CommandExt;
    let mut other = Command::new("sleep").arg("30").process_group(0).stdin(Stdio::null()).spawn().unwrap();
    let _cleanup = GroupGuard(other.id() as i32);
    let pid = other.id();
    let fake = json!({"detail": format!("pid {pid}"),
                      "process": {"pid": pid, "pgid": pid, "start_time": start_time(pid) - 1}});
    let n = ws.tamper(&format!("UPDATE attempts SET process = '{}' WHERE state = 'dispatched'", fake["process"]));
    assert_eq!(n, 1);

    ws.engine(&["run", "plan.json", "--json"]).expect_code(0);
    assert!(matches!(other.try_wait(), Ok(None)), "the unrelated process was signalled");
    let ended = events_of(&ws, "provider_processes_ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0].1["result"]["outcome"], "reused", "{:?}", ended[0].1);
    let _ = other.kill();
    let _ = other.wait();
}

/// Issue 38, eleventh round: the cgroups are made ahead and removed on a
/// thread of the engine's own; its exit still leaves none it made (those
/// made ahead for processes that never came, and the ended ones), and no
/// two processes were given the same one.
#[test]
fn a_finished_run_leaves_no_cgroup_it_made_and_gave_each_process_its_own() {
    let ws = Ws::new();
    let tasks = (0..12).map(|i| task(&format!("T{i}"), &["true"])).collect();
    ws.write_plan("plan.json", &plan(tasks));
    ws.engine(&["run", "plan.json", "--jobs", "2", "--json"]).expect_code(0);
    let recorded: Vec<std::path::PathBuf> = ws
        .events_of("dispatched")
        .into_iter()
        .filter_map(|(_, _, data)| data["process"]["cgroup"].as_str().map(std::path::PathBuf::from))
        .collect();
    let Some(first) = recorded.first() else {
        eprintln!("no cgroup recorded: this machine gives none (the fallback); nothing to check");
        return;
    };
    assert_eq!(recorded.len(), 12, "every process had a cgroup: {recorded:?}");
    let unique: std::collections::HashSet<_> = recorded.iter().collect();
    assert_eq!(unique.len(), 12, "each process its own cgroup: {recorded:?}");
    // `engine-PID-START-N`: everything this engine made starts with its
    // `engine-PID-START-`.
    let name = first.file_name().and_then(|n| n.to_str()).expect("a cgroup's name");
    let own = &name[..name.rfind('-').expect("engine-PID-START-N") + 1];
    let parent = first.parent().expect("the cgroups' folder");
    let left: Vec<String> = std::fs::read_dir(parent)
        .expect("the cgroups' folder is readable")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with(own))
        .collect();
    assert!(left.is_empty(), "the engine's exit left cgroups it made: {left:?}");
}
