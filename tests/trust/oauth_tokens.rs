//! Issue 27: the OAuth tokens' folder (`$XDG_STATE_HOME/engine/oauth`) is
//! out of every provider's reach, as the stores are: a confined provider's
//! real process tries to read a kept token, list the folder and plant a
//! token of its own, and each is refused; `"sandbox": "none"` is the
//! control that shows the read would land.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use serde_json::{json, Value};

use crate::support::workspace::arg;
use crate::support::*;

/// Tries each, prints `label OK|ERR errno`.
const THIEF: &str = r#"
import errno, os, sys
folder = sys.argv[1]
def attempt(label, fn):
    try:
        fn()
        print(label, "OK", flush=True)
    except OSError as e:
        print(label, "ERR", errno.errorcode.get(e.errno, e.errno), flush=True)
def read():
    data = open(os.path.join(folder, "kept.json")).read()
    if "SECRET-ACCESS" not in data:
        raise OSError(errno.ENOENT, "not the token")
attempt("read_token", read)
attempt("list_folder", lambda: os.listdir(folder) or (_ for _ in ()).throw(OSError(errno.ENOENT, "empty")))
attempt("plant_token", lambda: open(os.path.join(folder, "planted.json"), "w").write("{}"))
"#;

fn setup(sandbox: Option<Value>) -> (Ws, std::path::PathBuf) {
    let ws = Ws::new();
    let folder = ws.state_home().join("engine").join("oauth");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&folder).unwrap();
    let mut f =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(folder.join("kept.json")).unwrap();
    std::io::Write::write_all(&mut f, br#"{"access_token": "SECRET-ACCESS"}"#).unwrap();
    let mut provider = json!({"kind": "command"});
    if let Some(s) = sandbox {
        provider["sandbox"] = s;
    }
    let task = json!({"ref": "T1", "provider": "py", "effect": "local",
        "action": {"run": ["sh", "-c", "python3 -c \"$0\" \"$@\" > thief.txt", THIEF, arg(&folder)]}, "outputs": ["thief.txt"]});
    ws.write_plan(
        "plan.json",
        &json!({"version": 1, "goal": {"id": "g", "statement": "the tokens are out of reach"},
        "providers": {"py": provider}, "tasks": [task]}),
    );
    (ws, folder)
}

fn results(text: &str) -> std::collections::HashMap<String, String> {
    text.lines().filter_map(|l| l.split_once(' ')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn a_confined_provider_cannot_read_list_or_plant_oauth_tokens() {
    let (ws, folder) = setup(None);
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let got = results(&ws.read("thief.txt"));
    for label in ["read_token", "list_folder", "plant_token"] {
        let r = got.get(label).unwrap_or_else(|| panic!("{label} not tried: {got:?}"));
        assert!(r.starts_with("ERR"), "{label} was not refused: {got:?}");
    }
    assert!(!folder.join("planted.json").exists());
}

#[test]
fn unconfined_the_token_is_read() {
    let (ws, _folder) = setup(Some(json!("none")));
    ws.engine_json(&["run", "plan.json"]).expect(0, None);
    let got = results(&ws.read("thief.txt"));
    assert_eq!(got["read_token"], "OK", "the control: {got:?}");
}
