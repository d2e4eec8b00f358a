//! Issue 37, item 4: a root provider kept `CAP_DAC_READ_SEARCH` and every
//! other capability, with no seccomp filter: given the hidden store's file
//! handle it read the store with `open_by_handle_at` (the mount namespace
//! hides a path, not a handle), and it read the environment of any process
//! outside the engine (the shell that started it). Now every confined
//! process starts with no capability at all (bounding, effective,
//! permitted, inheritable and ambient sets empty), `no_new_privs`, and a
//! seccomp filter refusing file handles, `ptrace`, `process_vm_readv` and
//! `writev`, the mount family and the keyrings. Tried here by a real
//! process; `"sandbox": "none"` is the control that shows each attempt
//! lands when nothing stops it.

use serde_json::{json, Value};

use crate::support::workspace::arg;
use crate::support::*;

/// Tries each thing a provider must not do; prints one JSON object.
const PROBE: &str = r#"
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
handle_file, mount_dir, secret, try_mount = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "mount"
out = {}
def err():
    return "ERR " + errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
status = open("/proc/self/status").read().splitlines()
for line in status:
    key, _, value = line.partition(":")
    if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
        out[key] = value.strip()
# The store by the handle its owner's process took of it.
raw = open(handle_file, "rb").read()
buf = ctypes.create_string_buffer(raw, len(raw))
mount_fd = os.open(mount_dir, os.O_RDONLY | os.O_DIRECTORY)
fd = libc.open_by_handle_at(mount_fd, buf, os.O_RDONLY)
out["open_by_handle_at"] = ("OK " + os.read(fd, 15).decode("latin-1")) if fd >= 0 else err()
# A handle of a file of its own.
own = ctypes.create_string_buffer(8 + 128)
ctypes.memmove(own, (128).to_bytes(4, "little"), 4)
mount_id = ctypes.c_int()
r = libc.name_to_handle_at(-100, b"probe.py", own, ctypes.byref(mount_id), 0)
out["name_to_handle_at"] = "OK" if r == 0 else err()
out["ptrace"] = "OK" if libc.ptrace(0, 0, None, None) == 0 else err()
import platform
KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219}[platform.machine()]
KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3
out["keyctl"] = "OK" if libc.syscall(KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) >= 0 else err()
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
# Its own memory: nothing but the filter refuses that.
local, there = ctypes.create_string_buffer(8), ctypes.create_string_buffer(b"present", 8)
liov = iovec(ctypes.cast(local, ctypes.c_void_p), 8)
remote = iovec(ctypes.cast(there, ctypes.c_void_p), 8)
r = libc.process_vm_readv(os.getpid(), ctypes.byref(liov), 1, ctypes.byref(remote), 1, 0)
out["process_vm_readv"] = "OK" if r >= 0 else err()
if try_mount:
    os.makedirs("mnt", exist_ok=True)
    out["mount"] = "OK" if libc.mount(b"none", b"mnt", b"tmpfs", 0, None) == 0 else err()
def environ(pid):
    try:
        text = open("/proc/%d/environ" % pid, "rb").read()
        return "OK secret" if secret.encode() in text else "OK"
    except OSError as e:
        return "ERR " + errno.errorcode.get(e.errno, str(e.errno))
def parent(pid):
    return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
engine = os.getpid()
while open("/proc/%d/comm" % engine).read().strip() != "engine":
    engine = parent(engine)
shell = parent(engine)
out["environ_init"] = environ(1)
out["environ_shell"] = environ(shell)
print(json.dumps(out))
"#;

/// Takes a file handle of `path` (as its owner, unconfined) and writes it
/// (`struct file_handle`) to `to`.
const HANDLE: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8 + 128)
ctypes.memmove(buf, (128).to_bytes(4, "little"), 4)
mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, sys.argv[1].encode(), buf, ctypes.byref(mount_id), 0) != 0:
    sys.exit("name_to_handle_at: errno %d" % ctypes.get_errno())
size = int.from_bytes(buf.raw[:4], "little")
open(sys.argv[2], "wb").write(buf.raw[: 8 + size])
"#;

const SECRET: &str = "the-shells-own-secret-4711";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A workspace whose store exists (a first run), a handle of that store,
/// then a plan whose one task runs the probe under `sandbox`; run by a
/// shell that keeps its own secret in its environment. The probe's answer.
fn probe(sandbox: Option<Value>) -> Value {
    // Never a mount outside the run's mount namespace (the control's).
    let confined = sandbox.is_none();
    let ws = Ws::new();
    ws.write_plan(
        "first.json",
        &json!({"version": 1, "goal": {"id": "g0", "statement": "s"},
        "providers": {"b": {"kind": "builtin"}},
        "tasks": [{"ref": "B", "provider": "b", "effect": "none", "action": {"op": "noop"}}]}),
    );
    ws.engine(&["run", "first.json"]).expect_code(0);
    let handle = ws.side.join("store.handle");
    let made = std::process::Command::new("python3").args(["-c", HANDLE, arg(&ws.store()), arg(&handle)]).output();
    let made = made.expect("python3 runs");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    ws.write("probe.py", PROBE);
    let mut provider = json!({"kind": "command"});
    if let Some(s) = sandbox {
        provider["sandbox"] = s;
    }
    let mount_dir = ws.state_home();
    let task = json!({"ref": "T1", "provider": "py", "effect": "local",
        "action": {"run": ["sh", "-c", "python3 probe.py \"$@\" > probe.json", "probe", arg(&handle), arg(&mount_dir), SECRET,
                           if confined { "mount" } else { "no-mount" }]}, "outputs": ["probe.json"]});
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "nothing privileged"},
        "providers": {"py": provider}, "tasks": [task]}),
    );
    // The shell stays (`; exit`), the engine its child.
    let base = ws.command(&[]);
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "\"$0\" run plan.json; exit $?", ENGINE]).current_dir(&ws.dir);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.env("SHELLS_SECRET", SECRET);
    let out = ws.run_command(cmd);
    out.expect_code(0);
    serde_json::from_str(&ws.read("probe.json")).unwrap_or_else(|e| panic!("{e}: {}", ws.read("probe.json")))
}

#[test]
fn a_confined_provider_has_no_capability_no_handle_and_no_other_processs_environment() {
    let got = probe(None);
    let none = "0000000000000000";
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(got[set], none, "{set}: {got}");
    }
    if is_root() {
        assert_eq!(got["CapBnd"], none, "as root the bounding set is emptied too: {got}");
    }
    assert_eq!((&got["NoNewPrivs"], &got["Seccomp"]), (&json!("1"), &json!("2")), "{got}");
    for refused in ["open_by_handle_at", "name_to_handle_at", "ptrace", "keyctl", "process_vm_readv", "mount"] {
        assert_eq!(got[refused], "ERR EPERM", "{refused} was not refused: {got}");
    }
    for pid in ["environ_init", "environ_shell"] {
        assert!(got[pid].as_str().unwrap_or_default().starts_with("ERR"), "{pid} was read: {got}");
    }
}

/// The control: opted out of the sandbox, as root, the same process reads
/// the store by its handle and the shell's secret — what the capabilities
/// and the filter now stop.
#[test]
fn unconfined_as_root_the_same_attempts_land() {
    if !is_root() {
        eprintln!("skipped: the control's attempts need root's capabilities");
        return;
    }
    let got = probe(Some(json!("none")));
    assert_eq!(got["open_by_handle_at"], "OK SQLite format 3", "{got}");
    assert_eq!(got["process_vm_readv"], "OK", "{got}");
    assert_eq!(got["environ_shell"], "OK secret", "{got}");
    assert_eq!(got["name_to_handle_at"], "OK", "{got}");
    assert_ne!(got["CapEff"], "0000000000000000", "{got}");
}
