//! Issue 12, items 1 and 2 on a pseudo-terminal: the live view a person
//! sees while the run goes on (running tasks with ref, title and elapsed
//! time, the `[done/total]` counter, finished tasks above in colour, or
//! none under `NO_COLOR`), and Ctrl-C typed on the terminal, which the
//! kernel sends to the engine's process group alone.

use super::common::*;
use super::terminal::{has_colour, plain, Terminal};

/// T1 (title with a control sequence) holds until its child is killed,
/// then T2 fails after a second (the live view redraws its counter on its
/// 200 ms tick: T2 lasts long enough to show it).
fn two_tasks(ws: &Ws) {
    let mut t1 = task("T1", "none", &holding("t1", false));
    t1["title"] = "hold \u{1b}[2J on".into();
    let mut t2 = task("T2", "none", "sleep 1; exit 3");
    t2["depends_on"] = serde_json::json!(["T1"]);
    ws.write_plan("plan.json", &plan(vec![t1, t2]));
}

#[test]
fn a_terminal_shows_running_tasks_live_and_finished_ones_above_in_colour() {
    let ws = Ws::new();
    two_tasks(&ws);
    let mut term = Terminal::start(&ws, &["run", "plan.json"], &[]);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);

    // While T1 runs: its line (ref, escaped title, elapsed) and the header
    // (counter, goal, revision, elapsed) are on the screen.
    let screen = term.screen.wait_for("T1 hold \\x1b[2J on", SOON);
    term.screen.wait_for("[0/2] goal g r1", SOON);
    assert!(term.engine.alive() && !gone(leader), "the view shows before the run ends");
    assert!(
        !screen.contains("hold \u{1b}[2J"),
        "a control sequence from the plan reaches the terminal raw: {screen:?}"
    );
    assert!(!screen.contains("T1 succeeded"), "{screen:?}");
    // The task line's elapsed time moves while it runs.
    term.screen.wait_for("T1 hold \\x1b[2J on 2s", SOON);

    send(child, libc::SIGKILL); // T1's script ends: it succeeds.
                                // While T2 runs, the counter says one of two is done.
    term.screen.wait_for("[1/2] goal g r1", SOON);
    term.screen.wait_for("T2 task T2", SOON);
    let out = term.engine.wait(SOON);
    out.expect_code(1);
    let screen = term.screen.wait_for("stopped: task failed: T2", SOON);
    // Finished tasks scroll above, coloured by state, a failure with its class.
    assert!(screen.contains("\u{1b}[32mT1 succeeded ("), "{screen:?}");
    assert!(screen.contains("\u{1b}[31mT2 failed: provider_rejected ("), "{screen:?}");
}

#[test]
fn no_color_keeps_a_terminal_free_of_colour() {
    let ws = Ws::new();
    two_tasks(&ws);
    ws.write("t1.release", "");
    let mut term = Terminal::start(&ws, &["run", "plan.json"], &[("NO_COLOR", "1")]);
    term.engine.wait(SOON).expect_code(1);
    let screen = term.screen.wait_for("stopped: task failed: T2", SOON);
    assert!(screen.contains("T1 succeeded (") && screen.contains("T2 failed: provider_rejected ("), "{screen:?}");
    assert!(screen.contains("goal g r1"), "the live view, not plain lines: {screen:?}");
    assert!(!has_colour(&screen), "NO_COLOR: {screen:?}");
}

#[test]
fn progress_plain_on_a_terminal_prints_lines_not_a_live_view() {
    let ws = Ws::new();
    two_tasks(&ws);
    let mut term = Terminal::start(&ws, &["run", "plan.json", "--progress", "plain"], &[]);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);
    term.screen.wait_for("] T1 started: hold \\x1b[2J on (try 1)", SOON);
    send(child, libc::SIGKILL);
    term.engine.wait(SOON).expect_code(1);
    let screen = term.screen.wait_for("stopped: task failed: T2", SOON);
    assert!(plain(&screen).contains("] T2 failed: provider_rejected ("), "{screen:?}");
    assert!(!screen.contains("\u{1b}[2K") && !screen.contains("[0/2]"), "no live view: {screen:?}");
}

#[test]
fn quiet_on_a_terminal_prints_the_summary_only() {
    let ws = Ws::new();
    two_tasks(&ws);
    ws.write("t1.release", "");
    let mut term = Terminal::start(&ws, &["run", "plan.json", "--quiet"], &[]);
    term.engine.wait(SOON).expect_code(1);
    let screen = plain(&term.screen.wait_for("stopped: task failed: T2", SOON));
    assert!(!screen.contains("started") && !screen.contains("[0/2]") && !screen.contains("(0."), "{screen:?}");
    assert!(screen.starts_with("goal g (revision 1)"), "{screen:?}");
}

#[test]
fn ctrl_c_typed_on_the_terminal_stops_the_run_and_ends_the_provider() {
    let ws = Ws::new();
    ws.write_plan("plan.json", &plan(vec![task("T1", "local", &holding("t1", false))]));
    let mut term = Terminal::start(&ws, &["run", "plan.json"], &[]);
    let (leader, child) = wait_started(&ws, "t1");
    let _cleanup = GroupGuard(leader);
    // The engine leads the terminal's foreground group; the provider does not.
    assert_eq!(pgid(term.engine.pid()), term.engine.pid());
    assert_ne!(pgid(leader), term.engine.pid());

    term.type_keys(b"\x03");
    term.engine.wait(SOON).expect_code(130);
    wait_gone(leader, "the provider");
    wait_gone(child, "the provider's child");
    let screen = plain(&term.screen.wait_for("go on with `engine run plan.json`", SOON));
    assert!(screen.contains("SIGINT: stopping"), "{screen:?}");
    // The terminal echoed `^C` after the live view's last frame: no frame
    // reaches the last column, so the echo never wraps onto a line the view
    // does not know of (its last frame would then stay on screen).
    let widest = widest_line(&screen);
    assert!(widest <= 97, "a live frame {widest} columns wide on a 100-column terminal: {screen:?}");
    assert!(screen.contains("stopped by SIGINT: nothing new was started; cancelled, not failed: T1"), "{screen:?}");
    assert_eq!(ws.ledger().task_state("T1"), "cancelled");
    assert_eq!(ws.attempts()[0].state, "cancelled");
    assert_eq!(ws.ledger().lease().pid, None, "the lease is given back");

    ws.write("t1.release", "");
    ws.engine_json(&["run", "plan.json"]).expect_code(0);
    assert_eq!(runs(&ws, "t1"), 2, "the cancelled local task ran again");
}

/// The widest line of the live view (its header `[n/m] …` and its task
/// lines, indented) the terminal was given, cursor movements and the
/// echoed `^C` left out.
fn widest_line(screen: &str) -> usize {
    let mut text = String::new();
    let mut chars = screen.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then a final letter.
            if chars.next() == Some('[') {
                for x in chars.by_ref() {
                    if x.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        text.push(c);
    }
    let frame = |l: &&str| l.starts_with('[') || l.starts_with("  ");
    text.replace("^C", "").split(['\r', '\n']).filter(frame).map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `engine ARGS` on a terminal until it ends (exit 0, or 1 for a run,
/// 2 for an error); what the terminal showed once it shows `until`.
fn on_terminal(ws: &Ws, args: &[&str], env: &[(&str, &str)], until: &str) -> String {
    let mut term = Terminal::start(ws, args, env);
    let code = term.engine.wait(SOON).code();
    let screen = term.screen.wait_for(until, SOON);
    let expected = match args {
        _ if args.contains(&"run") => 1,
        _ if until == "did you mean" => 2,
        _ => 0,
    };
    assert_eq!(code, expected, "{args:?}: {screen:?}");
    screen
}

#[test]
fn a_terminal_gets_colour_in_summaries_unless_a_person_said_otherwise() {
    let ws = Ws::new();
    two_tasks(&ws);
    ws.write("t1.release", "");
    let stop = "stopped: task failed: T2";
    // The run's summary (stdout), not only its progress: the stop in red,
    // `next:` and its command styled, the states coloured.
    let screen = on_terminal(&ws, &["run", "plan.json", "--quiet"], &[], stop);
    assert!(screen.contains("\u{1b}[31m\u{1b}[1mstopped\u{1b}[0m: task"), "{screen:?}");
    assert!(screen.contains("next:\u{1b}[0m"), "{screen:?}");
    assert!(screen.contains("\u{1b}[32msucceeded"), "{screen:?}");
    // status, explain and an error (stderr) alike.
    let status = on_terminal(&ws, &["status"], &[], "budgets");
    assert!(status.contains("\u{1b}[31mfailed\u{1b}[0m"), "{status:?}");
    assert!(has_colour(&on_terminal(&ws, &["explain", "T2"], &[], "classification")));
    let error = on_terminal(&ws, &["explain", "T3"], &[], "did you mean");
    assert!(error.contains("\u{1b}[31m\u{1b}[1merror\u{1b}[0m: \u{1b}[31m\u{1b}[1mUSAGE_ERROR"), "{error:?}");
    // Off: --color never, NO_COLOR, a dumb terminal; NO_COLOR yields to
    // a person's explicit --color always.
    for (args, env) in [
        (&["--color", "never", "status"][..], &[][..]),
        (&["status"], &[("NO_COLOR", "1")]),
        (&["status"], &[("TERM", "dumb")]),
        (&["status", "--color", "never"], &[("NO_COLOR", "")]),
    ] {
        let screen = on_terminal(&ws, args, env, "budgets");
        assert!(!has_colour(&screen), "{args:?} {env:?}: {screen:?}");
    }
    assert!(has_colour(&on_terminal(&ws, &["--color", "always", "status"], &[("NO_COLOR", "1")], "budgets")));
    // An empty NO_COLOR is not set (no-color.org).
    assert!(has_colour(&on_terminal(&ws, &["status"], &[("NO_COLOR", "")], "budgets")));
}

/// Issue 41: `engine man CMD` on a terminal reads as a page, not roff; into
/// a pipe it stays roff (for `man -l -`).
#[test]
fn a_man_page_on_a_terminal_is_text_and_roff_in_a_pipe() {
    let ws = Ws::new();
    let screen = plain(&on_terminal(&ws, &["man", "status"], &[], "OPTIONS"));
    assert!(screen.contains("NAME") && screen.contains("engine-status - "), "{screen:?}");
    assert!(!screen.contains(".SH") && !screen.contains("\\f") && !screen.contains(".TP"), "{screen:?}");
    let piped = ws.engine(&["man", "status"]);
    assert!(piped.stdout.contains(".SH NAME"), "{}", piped.stdout);
}
