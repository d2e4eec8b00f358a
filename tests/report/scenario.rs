//! The stores the report tests read: the money demo after its repair, and
//! a plan with one of everything — a failure whose output is hostile
//! markup and terminal escapes, an unknown outcome (the HTTP receiver and
//! a SIGKILL after dispatch), an approval given and one awaited, a task
//! reused by a revision, and a blocked one.

use serde_json::{json, Value};

use crate::common::{self, Receiver, Ws};

/// What the hostile task prints: markup that would run if it were not
/// escaped, and terminal escapes (a colour and an OSC window title).
pub const HOSTILE: &str = r#"cat <<'END'
<script>document.documentElement.setAttribute('data-pwned','script')</script>
</script></pre><img src=x onerror="document.documentElement.setAttribute('data-pwned','img')">
END
printf 'colour \033[31mred\033[0m title \033]0;owned-title\007 end\n'
exit 3
"#;

/// The money demo, run (T2 fails its validation) then repaired.
pub fn money() -> crate::helpers::Ws {
    let ws = crate::helpers::Ws::fixture("money");
    ws.json(&["run", "plan.json"], 1);
    ws.json(&["repair", "T2"], 0);
    ws
}

pub struct Mixed {
    pub ws: Ws,
    pub rcv: Receiver,
}

fn sh(task_ref: &str, run: Value, extra: Value) -> Value {
    let mut t = json!({"ref": task_ref, "title": format!("{task_ref} step"), "provider": "sh", "action": {"run": run},
                       "effect": "local", "inputs": ["src.txt"]});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            t[k] = v;
        }
    }
    t
}

fn plan(rcv: &Receiver, lint_args: &[&str]) -> Value {
    let mut lint_run = vec!["sh", "lint.sh"];
    lint_run.extend_from_slice(lint_args);
    let mut send = common::http_task("send-invoice", "external");
    send["title"] = json!("send the invoice");
    let mut publish = common::http_task("publish", "external");
    publish["requires_approval"] = json!(true);
    publish["action"] = json!({"body": {"doc": "release"}});
    json!({
        "version": 1,
        "goal": {"id": "release-1", "statement": "ship release 1 and invoice it",
                 "acceptance": [{"id": "A1", "statement": "the build output exists", "check": {"run": ["test", "-f", "out.txt"]}},
                                {"id": "A2", "statement": "the customer is happy"}],
                 "constraints": ["no force-push"]},
        "providers": {"sh": {"kind": "command"}, "r": common::http_provider(rcv, false)},
        "tasks": [
            send,
            sh("build", json!(["sh", "-c", "cp src.txt out.txt; echo built"]), json!({
                "validations": [{"id": "V1", "run": ["test", "-f", "out.txt"]}], "may_change": ["out.txt"]})),
            sh("lint", json!(lint_run), json!({"depends_on": ["build"], "effect": "none", "inputs": ["lint.sh"]})),
            publish,
            sh("notify", json!(["true"]), json!({"depends_on": ["send-invoice"], "effect": "none"})),
        ]
    })
}

/// Revision 2 of the mixed plan, as a person left it: `send-invoice`
/// unknown, `build` reused, `lint` failed, `publish` awaiting a fresh
/// approval (one was given and used in revision 1), `notify` blocked.
pub fn mixed() -> Mixed {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write("src.txt", "source\n");
    ws.write("lint.sh", HOSTILE);
    ws.write_plan("plan.json", &plan(&rcv, &[]));
    // The first dispatch (send-invoice, first in plan order) is killed
    // after its request went out; the next run cannot tell what happened.
    assert!(ws.run_fp("after_dispatch").killed(), "the failpoint run was not killed");
    assert_eq!(ws.attempts().len(), 1, "only send-invoice was dispatched before the kill");
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    let publish_op = ws.op_of("publish");
    ws.engine_json(&["approve", &publish_op, "--note", "release notes <b>checked</b>", "--actor", "alice"])
        .expect(0, None);
    ws.run().expect(3, Some("EXTERNAL_EFFECT_UNKNOWN"));
    ws.write_plan("plan.json", &plan(&rcv, &["--strict"]));
    let revised = ws.engine_json(&["revise", "plan.json", "--reason", "lint with the strict rules", "--jobs", "1"]);
    revised.expect(3, None);
    assert_eq!(revised.json()["run"]["code"], "EXTERNAL_EFFECT_UNKNOWN", "{}", revised.describe());
    Mixed { ws, rcv }
}

/// The states revision 2 is left in.
pub const MIXED_STATES: &[(&str, &str)] = &[
    ("send-invoice", "effect_unknown"),
    ("build", "reused"),
    ("lint", "failed"),
    ("publish", "awaiting_approval"),
    ("notify", "blocked"),
];
