//! Issue 24, hole 2: a provider kept the whole network and the engine's
//! whole environment (API keys). Now a command's processes get no network
//! unless the plan declares it, TCP to the declared ports only where it
//! does, and only the environment variables it names — each tried here by
//! a real process against a real receiver, whose own log says what reached
//! it; the ledger records what was enforced and says what was not.

use serde_json::{json, Value};

use crate::support::os_users::Reachable;
use crate::support::workspace::arg;
use crate::support::*;

/// A task whose command POSTs to the receiver at `port` (a delivery keyed
/// by its operation id, the receiver's own log its ground truth) and says
/// how the attempt went in `$SIDE/net.txt`.
fn deliver(port: u16) -> Value {
    let script = format!(
        "if curl -s -m 5 -o /dev/null -X POST -H \"Idempotency-Key: $ENGINE_OPERATION_ID\" -H 'Engine-Try: 1' \
         --data '{{}}' http://127.0.0.1:{port}/effect; then echo delivered; else echo \"refused $?\"; fi > net.txt"
    );
    json!({"ref": "T1", "title": "deliver", "provider": "sh", "effect": "local",
           "action": {"run": ["sh", "-c", script]}, "outputs": ["net.txt"]})
}

fn plan(provider: Value, tasks: Vec<Value>) -> Value {
    json!({"version": 1, "goal": {"id": "g", "statement": "the network is the plan's"},
           "providers": {"sh": provider}, "tasks": tasks})
}

/// The recorded network status of T1's last attempt.
fn network_of(ws: &Ws) -> Value {
    let status = ws.json(&["status"], 0);
    status["tasks"][0]["last_attempt"]["sandbox"]["network"].clone()
}

/// Nothing declared: no network at all. The receiver on the machine's
/// loopback never hears of the call; the attempt records the namespace.
#[test]
fn a_command_without_a_network_declaration_reaches_nothing() {
    let rcv = Receiver::start(&[]);
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"kind": "command"}), vec![deliver(rcv.port)]));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    assert!(ws.read("net.txt").starts_with("refused"), "{}", ws.read("net.txt"));
    assert!(rcv.deliveries().is_empty(), "the receiver got {:?}", rcv.deliveries());
    assert_eq!(network_of(&ws), json!({"state": "enforced", "by": "namespace"}));
    let explain = ws.engine(&["explain", "T1"]).stdout;
    assert!(explain.contains("network: none (a network namespace of its own"), "{explain}");
}

/// Declared: TCP to that port, and the delivery lands; another port stays
/// closed; the record names the port and claims no host filtering.
#[test]
fn a_declared_port_is_reached_and_no_other() {
    let rcv = Receiver::start(&[]);
    let other = Receiver::start(&[]);
    let ws = Ws::new();
    let provider = json!({"kind": "command", "network": {"connect": [format!("127.0.0.1:{}", rcv.port)]}});
    let mut second = deliver(other.port);
    second["ref"] = json!("T2");
    second["depends_on"] = json!(["T1"]);
    second["action"]["run"][2] = json!(second["action"]["run"][2].as_str().unwrap().replace("net.txt", "net2.txt"));
    second["outputs"] = json!(["net2.txt"]);
    ws.write_plan("plan.json", &plan(provider, vec![deliver(rcv.port), second]));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    assert_eq!(ws.read("net.txt").trim(), "delivered");
    assert_eq!(rcv.deliveries().len(), 1, "{:?}", rcv.deliveries());
    assert!(ws.read("net2.txt").starts_with("refused"), "{}", ws.read("net2.txt"));
    assert!(other.deliveries().is_empty(), "the undeclared port got {:?}", other.deliveries());
    assert_eq!(network_of(&ws), json!({"state": "partial", "by": "landlock", "tcp_connect_ports": [rcv.port]}));
    let explain = ws.engine(&["explain", "T1"]).stdout;
    assert!(explain.contains(&format!("TCP connect to port {} on any host", rcv.port)), "{explain}");
    assert!(explain.contains("not hosts"), "{explain}");
}

/// A malformed `HOST:PORT` is refused at its place, before anything runs.
#[test]
fn a_bad_connect_entry_is_plan_invalid_at_its_place() {
    let ws = Ws::new();
    let provider = json!({"kind": "command", "network": {"connect": ["api.example.com:443", "api.example.com"]}});
    ws.write_plan("plan.json", &plan(provider, vec![deliver(9)]));
    let out = ws.engine_json(&["run", "plan.json"]);
    out.expect(2, Some("PLAN_INVALID"));
    assert_eq!(out.json()["error"]["place"], "$.providers.sh.network.connect[1]", "{}", out.describe());
    assert!(!ws.path("net.txt").exists(), "nothing ran");
}

/// A task that prints its environment.
fn print_env(task_ref: &str, out: &str) -> Value {
    json!({"ref": task_ref, "title": "env", "provider": "sh", "effect": "local",
           "action": {"run": ["sh", "-c", format!("env > {out}")]},
           // Declared as a change, not an output: outputs are kept in the
           // ledger, and this one holds the environment.
           "may_change": [out]})
}

fn names(text: &str) -> Vec<String> {
    let mut n: Vec<String> = text.lines().filter_map(|l| l.split('=').next()).map(str::to_string).collect();
    n.sort();
    n
}

/// The engine's environment holds an API key and the test harness's own
/// variables; a provider that names none of them sees none of them.
#[test]
fn a_provider_gets_only_the_minimal_environment() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(json!({"kind": "command"}), vec![print_env("T1", "plain.txt")]));
    let out = ws.engine_env(&["--json", "run", "plan.json"], &[("API_KEY", "k3y-value-9")]);
    out.expect(0, None);
    // The minimal set (as far as the engine has it), the call's identity,
    // and what the shell itself sets; nothing of the engine's own (its
    // test harness sets SIDE, XDG_STATE_HOME, RUST_BACKTRACE, ...).
    let plain = names(&ws.read("plain.txt"));
    let allowed = ["ENGINE_OPERATION_ID", "ENGINE_TRY", "HOME", "LANG", "PATH", "TMPDIR", "PWD", "SHLVL", "_"];
    assert!(plain.iter().all(|n| allowed.contains(&n.as_str())), "{plain:?}");
    assert!(plain.contains(&"PATH".to_string()) && plain.contains(&"ENGINE_OPERATION_ID".to_string()), "{plain:?}");
}

/// A provider that names the key gets it (and its validations too); its
/// value is nowhere in the ledger or the plan (the plan names it in
/// `secrets` too, so what the provider prints is redacted).
#[test]
fn a_named_variable_reaches_its_provider_and_its_value_stays_out_of_the_ledger() {
    let ws = Ws::new();
    let mut p = plan(json!({"kind": "command", "env": ["API_KEY"]}), vec![print_env("T1", "named.txt")]);
    p["secrets"] = json!(["API_KEY"]);
    p["tasks"][0]["validations"] = json!([{"id": "V1", "run": ["sh", "-c", "test -n \"$API_KEY\""], "expect_exit": 0}]);
    ws.write_plan("plan.json", &p);
    let out = ws.engine_env(&["--json", "run", "plan.json"], &[("API_KEY", "k3y-value-9"), ("OTHER_SECRET", "x")]);
    out.expect(0, None);
    assert!(ws.read("named.txt").lines().any(|l| l == "API_KEY=k3y-value-9"), "{}", ws.read("named.txt"));
    assert!(!ws.read("named.txt").contains("OTHER_SECRET"));
    // The name is recorded, never the value.
    let status = ws.json(&["status"], 0);
    let env = &status["tasks"][0]["last_attempt"]["sandbox"]["env"];
    assert!(env.as_array().unwrap().contains(&json!("API_KEY")), "{status}");
    let needle = b"k3y-value-9";
    let db = ws.ledger();
    let leaked = db.blobs().iter().filter(|b| b.data.windows(needle.len()).any(|w| w == needle)).count();
    assert_eq!(leaked, 0, "the value is in a blob");
    assert!(!db.snapshot().to_string().contains("k3y-value-9"), "the value is in the ledger");
    assert!(!std::fs::read_to_string(ws.path("plan.json")).unwrap().contains("k3y"), "nor in the plan");
}

/// Issue 29, defect 6: a provider read `/proc/$PPID/environ`, the engine's
/// whole environment (`ENGINE_STORE`, keys). The engine blanks what that
/// file shows; and since issue 37 (item 4) a confined provider, holding no
/// capability, may not open it at all.
#[test]
fn a_provider_cannot_read_the_engines_environment_through_proc() {
    let ws = Ws::new();
    let script = "tr '\\0' '\\n' > environ.txt < /proc/$PPID/environ; echo $? > environ.rc; \
                  tr '\\0' '\\n' < /proc/$PPID/cmdline | head -1 > cmdline.txt";
    let task = json!({"ref": "T1", "title": "peek", "provider": "sh", "effect": "local",
                      "action": {"run": ["sh", "-c", script]},
                      "outputs": ["environ.txt", "environ.rc", "cmdline.txt"]});
    ws.write_plan("plan.json", &plan(json!({"kind": "command"}), vec![task]));
    let store = ws.outside_store("peek");
    let out = ws
        .engine_env(&["--json", "run", "plan.json"], &[("ENGINE_STORE", arg(&store)), ("PEEK_MARKER", "m4rker-value")]);
    out.expect(0, None);
    assert!(ws.read("cmdline.txt").contains("engine"), "the parent is the engine: {}", ws.read("cmdline.txt"));
    let seen = ws.read("environ.txt");
    for secret in ["m4rker-value", "PEEK_MARKER", arg(&store), "ENGINE_STORE", "XDG_STATE_HOME"] {
        assert!(!seen.contains(secret), "the provider read {secret} from the engine's environ: {seen}");
    }
    assert_ne!(ws.read("environ.rc").trim(), "0", "the file is not even opened: {seen:?}");
    // The engine itself still had its environment: the store it used is
    // the one ENGINE_STORE named.
    assert!(store.exists(), "the engine used the store ENGINE_STORE named");
}

/// The engine run as an unprivileged user (root here makes one with
/// `setpriv`): in the workspace, its side folder and its state home, which
/// that user owns, the engine binary at a path it may reach (`place`).
fn as_nobody(place: &Reachable, ws: &Ws, args: &[&str]) -> Out {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(place.engine());
    cmd.args(args).current_dir(&ws.dir).env_clear();
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin").env("HOME", ws.state_home()).env("XDG_STATE_HOME", ws.state_home());
    ws.run_command(cmd)
}

/// Without privileges the engine can make neither namespace nor cgroup:
/// a command that declares no network is refused TCP by Landlock alone
/// (the receiver still hears nothing), the stores are visible, and its
/// descendants are tracked by process group — each recorded and said on
/// stderr, none claimed.
#[test]
fn without_privileges_what_cannot_be_made_is_recorded_and_said() {
    // SAFETY: geteuid has no arguments.
    if unsafe { libc::geteuid() } != 0 {
        return; // the engine already runs unprivileged: the other tests show it
    }
    // The engine binary and the state folder where that user can reach them.
    let place = Reachable::new("without_privileges_what_cannot_be_made_is_recorded_and_said");
    let rcv = Receiver::start(&[]);
    let ws = Ws::with_state(place.folder("engine-state-"));
    // T2 leaves a `setsid` escapee and exits 0: without a cgroup the engine,
    // as the subreaper, finds it by the marks it carries.
    let escapee = json!({"ref": "T2", "title": "escapee", "provider": "sh", "effect": "local",
        "action": {"run": ["sh", "-c", "setsid sh -c 'exec sleep 30' > /dev/null 2>&1 < /dev/null & echo $! > escapee.pid"]}, "outputs": ["escapee.pid"]});
    ws.write_plan("plan.json", &plan(json!({"kind": "command"}), vec![deliver(rcv.port), escapee]));
    for p in [ws.root(), ws.dir.clone(), ws.side.clone(), ws.state_home(), ws.path("plan.json")] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let out = as_nobody(&place, &ws, &["--json", "run", "plan.json"]);
    out.expect(1, None);
    assert_eq!(out.json()["failed"], json!(["T2"]), "{}", out.describe());
    let escapee: i32 = ws.read("escapee.pid").trim().parse().unwrap();
    let _cleanup = GroupGuard(escapee);
    assert!(gone(escapee), "the escapee (pid {escapee}) outlived its attempt");
    assert!(ws.read("net.txt").starts_with("refused"), "{}", ws.read("net.txt"));
    assert!(rcv.deliveries().is_empty(), "the receiver got {:?}", rcv.deliveries());
    for said in ["restricted by Landlock's TCP rules only", "stores are not hidden", "no cgroup of their own"] {
        assert_eq!(out.stderr.matches(said).count(), 1, "said once: {said}\n{}", out.stderr);
    }
    let status = as_nobody(&place, &ws, &["--json", "status"]);
    status.expect_code(0);
    let doc = status.json();
    let t2 = &doc["tasks"][1]["last_attempt"];
    assert_eq!(t2["classification"]["rule"], "descendants_outlived_the_command", "{doc}");
    let sandbox = doc["tasks"][0]["last_attempt"]["sandbox"].clone();
    assert_eq!(sandbox["state"], "enforced", "Landlock needs no privilege: {sandbox}");
    assert_eq!(sandbox["network"], json!({"state": "partial", "by": "landlock", "tcp_connect_ports": []}), "{sandbox}");
    assert_eq!(sandbox["stores"]["state"], "unavailable", "{sandbox}");
    let log = as_nobody(&place, &ws, &["--json", "log"]);
    assert!(!log.stdout.contains("\"cgroup\""), "no cgroup is recorded where none was made: {}", log.stdout);
    assert!(log.stdout.contains("\"marker\""), "the marks it tracked by are: {}", log.stdout);
}
