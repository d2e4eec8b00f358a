//! A folder whose name holds a space and quotes, as a clone under
//! `~/new user/` or a plan in `Bob's "final" plans` has: the README's first
//! steps run from inside it, with the engine's state folder (where the
//! store goes) under such a name too.

use std::fs;

use super::common::*;

/// A space, a single quote and a double quote: what a shell line that
/// does not quote the path breaks on.
const ODD: &str = "Bob's \"final\" plans";

#[test]
fn the_readmes_first_steps_run_from_a_folder_whose_name_holds_a_space_and_quotes() {
    let ws = Ws::new();
    let folder = ws.path(ODD);
    fs::create_dir(&folder).unwrap();
    let state = ws.state_home().join(ODD);
    fs::create_dir(&state).unwrap();
    let engine = |args: &[&str]| {
        let mut cmd = ws.command(args);
        cmd.current_dir(&folder).env("XDG_STATE_HOME", &state);
        ws.run_command(cmd)
    };

    engine(&["init", "first-plan"]).expect_code(0);
    let run = engine(&["run", "first-plan/plan.json"]);
    assert_eq!(run.code(), 0, "{}", run.describe());
    assert!(run.stdout.contains("goal satisfied"), "{}", run.stdout);
    // The agent really ran, in the plan's folder, and saw its request.
    let summary = fs::read_to_string(folder.join("first-plan/summary.md")).unwrap();
    assert!(summary.contains("hello, world") && summary.contains("try 1"), "{summary}");
    // The store is where the state folder says, and whole.
    let status = engine(&["--json", "status", "--workspace", "first-plan"]);
    let store = status.json()["store"].as_str().unwrap_or_default().to_string();
    assert!(store.starts_with(state.to_str().unwrap()), "store {store:?} is not under {}", state.display());
    engine(&["verify", "--workspace", "first-plan"]).expect_code(0);
}
