//! Issue 9, defect 10: an agent (protocol agent-json) that prints more than
//! the capture bound before its report line always failed
//! `provider_output_invalid`, because only the head was kept. The capture
//! keeps the head and the tail, records the gap, and the report is read
//! from the tail.

use serde_json::{json, Value};

use super::common::*;

const CHATTY_AGENT: &str = "import sys\n\
sys.stdin.read()\n\
sys.stdout.write('thinking out loud, at length\\n' * 120000)\n\
print('{\"status\": \"done\", \"summary\": \"wrote it\", \"claimed_cause\": null}')\n";

#[test]
fn an_agent_that_talks_past_the_bound_is_still_heard() {
    let ws = Ws::new();
    ws.write("agent.py", CHATTY_AGENT);
    let mut p = plan(vec![json!({
        "ref": "A1", "title": "a chatty agent", "provider": "agent", "effect": "none",
        "action": {"run": ["python3", "agent.py"]},
        "validations": [{"id": "V1", "run": ["true"]}],
    })]);
    p["providers"]["agent"] = json!({"kind": "command", "protocol": "agent-json"});
    ws.write_plan("plan.json", &p);

    let run = ws.engine(&["run", "plan.json", "--json"]);
    run.expect_code(0);

    let explain = ws.engine(&["explain", "A1", "--json"]).json();
    let a = &explain["attempts"][0];
    assert_eq!(a["claims"].as_array().map(Vec::len), Some(1), "the report was read: {a:#}");
    assert_eq!(a["claims"][0]["data"]["summary"], "wrote it");
    let exit = a["evidence"].as_array().unwrap().iter().map(|e| &e["evidence"]).find(|e| e["kind"] == "process_exit");
    let stdout: &Value = &exit.expect("process exit evidence")["stdout"];
    let total = "thinking out loud, at length\n".len() * 120_000
        + "{\"status\": \"done\", \"summary\": \"wrote it\", \"claimed_cause\": null}\n".len();
    assert_eq!(stdout["total_bytes"], total, "{stdout}");
    assert_eq!((stdout["truncated"].as_bool(), stdout["kept_bytes"].as_u64()), (Some(true), Some(1_048_576)));
    assert_eq!(stdout["omitted"]["bytes"], total - 1_048_576, "the gap is recorded: {stdout}");
    assert_eq!(stdout["omitted"]["at"], 524_288);
    assert!(stdout["excerpt"].as_str().unwrap().ends_with("\"claimed_cause\": null}"), "{stdout}");

    let text = ws.engine(&["explain", "A1"]);
    assert!(text.stdout.contains(&format!("{} in between not kept", total - 1_048_576)), "{}", text.stdout);
}
