//! What a person sees while a run goes on, on stderr (stdout keeps the
//! summary, and `--json`'s one document, unchanged):
//!
//! - on a terminal, a live view (`indicatif`): a line per running task
//!   (ref, title, elapsed), a `[complete/total]` counter with the goal's
//!   elapsed time, and each task that comes to rest printed above it with
//!   its state, duration and, for a failure, its class;
//! - elsewhere (a pipe, a file, a CI log), or with `--progress plain`, one
//!   plain line per task start and end, as it happens;
//! - with `--quiet`, nothing (the summary only).
//!
//! Colour as `--color` chose for stderr (`paint`: a terminal without
//! `NO_COLOR`, by default). Every string from a plan or a provider passes
//! `escape::for_terminal`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use console::Style;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::escape::for_terminal;
use crate::run::progress::{Silent, Sink, Update};
use crate::state::TaskState;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A live view on a terminal, plain lines elsewhere.
    Auto,
    /// Plain lines, terminal or not.
    Plain,
    /// Nothing: the summary only.
    Quiet,
}

/// The sink for `mode`, writing to stderr.
pub fn sink(mode: Mode) -> Arc<dyn Sink> {
    let terminal = std::io::stderr().is_terminal();
    match mode {
        Mode::Quiet => Arc::new(Silent),
        Mode::Auto if terminal => Arc::new(Live::new(super::paint::stderr())),
        Mode::Auto | Mode::Plain => Arc::new(Plain::new()),
    }
}

/// `[mm:ss]` since the run began.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("[{:02}:{:02}]", s / 60, s % 60)
}

/// A duration as a person reads it: `0.4s`, `12.0s`, `3m 05s`.
pub fn took(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 60_000 {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    } else {
        format!("{}m {:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// The line for a task that came to rest (without the clock).
fn ended_line(task_ref: &str, state: TaskState, class: Option<&str>, d: Duration) -> String {
    let task_ref = for_terminal(task_ref);
    match class {
        Some(class) => format!("{task_ref} {state}: {class} ({})", took(d)),
        None => format!("{task_ref} {state} ({})", took(d)),
    }
}

/// How far a provider says it is: `2/3`, `40%` of nothing known, `0.5/2`;
/// with its message (escaped), bounded by the provider.
fn note_words(progress: f64, total: Option<f64>, message: Option<&str>) -> String {
    let n = |x: f64| if x.fract() == 0.0 && x.abs() < 1e15 { format!("{x:.0}") } else { format!("{x:.1}") };
    let at = match total {
        Some(t) => format!("{}/{}", n(progress), n(t)),
        None => n(progress),
    };
    // Kept on the task's one line: a newline in a server's message would
    // start a line that looks like the engine's own.
    match message {
        Some(m) if !m.is_empty() => format!("{at} {}", for_terminal(m).replace('\n', "\\n")),
        _ => at,
    }
}

/// The line for a plain view, if this update has one (without the clock).
pub fn plain_line(u: &Update) -> Option<String> {
    Some(match u {
        Update::Began { goal, revision, total, complete } => {
            let tasks = super::count(*total, "task");
            format!("goal {} (revision {revision}): {tasks}, {complete} complete", for_terminal(goal.as_str()))
        }
        // A task without a title is named by its ref alone.
        Update::TaskStarted { task_ref, title: "", try_no } => {
            format!("{} started (try {try_no})", for_terminal(task_ref))
        }
        Update::TaskStarted { task_ref, title, try_no } => {
            format!("{} started: {} (try {try_no})", for_terminal(task_ref), for_terminal(title))
        }
        Update::Validating { .. } | Update::Ended => return None,
        Update::Note { task_ref, progress, total, message } => {
            format!("{} progress {}", for_terminal(task_ref), note_words(*progress, *total, *message))
        }
        Update::TaskEnded { task_ref, state, class, took, .. } => {
            ended_line(task_ref, *state, class.map(|c| c.as_str()), *took)
        }
        Update::Accepting { checks } => format!("acceptance: {} running", super::count(*checks, "check")),
        Update::Stopping { signal, in_flight, groups, grace } => format!(
            "{signal}: stopping — nothing new starts; {in_flight} in flight, SIGTERM to {}; \
             SIGKILL in {}s (a second Ctrl-C: now)",
            super::count(*groups, "process group"),
            grace.as_secs()
        ),
        Update::Killing { groups, by_signal } => format!(
            "SIGKILL to {}{}",
            super::count(*groups, "process group"),
            if *by_signal { " (second signal)" } else { " (grace over)" }
        ),
    })
}

/// One line per task start and end, as it happens.
struct Plain {
    began: Instant,
}

impl Plain {
    fn new() -> Plain {
        Plain { began: Instant::now() }
    }
}

impl Sink for Plain {
    fn update(&self, u: &Update) {
        if let Some(line) = plain_line(u) {
            // A closed stderr is not worth failing the run over.
            let line = match super::paint::stderr() {
                true => super::paint::paint(&line),
                false => line,
            };
            // One write a line (stderr is unbuffered: `writeln!` would
            // make one system call per piece).
            let whole = format!("{} {line}\n", clock(self.began.elapsed()));
            let _ = std::io::stderr().lock().write_all(whole.as_bytes());
        }
    }
}

/// The live view: a header with the counter and the goal's elapsed time,
/// a line per running task, and each finished task printed above.
struct Live {
    multi: MultiProgress,
    header: ProgressBar,
    running: Mutex<HashMap<String, Running>>,
    colour: bool,
}

/// A running task's line, and its title as shown (escaped).
struct Running {
    bar: ProgressBar,
    title: String,
}

const TICK: Duration = Duration::from_millis(200);

/// Columns the live view leaves free at the right edge: the terminal
/// echoes a typed Ctrl-C (`^C`) where the cursor is, and a frame filled to
/// the last column would wrap it onto a line of its own, one the view does
/// not know of — its last frame would then stay on screen above the
/// summary.
const ECHO_COLUMNS: u16 = 3;

/// stderr as the live view draws on it: its width less `ECHO_COLUMNS`.
#[derive(Debug)]
struct Narrow(console::Term);

impl indicatif::TermLike for Narrow {
    fn width(&self) -> u16 {
        self.0.size().1.saturating_sub(ECHO_COLUMNS).max(1)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Live {
    fn new(colour: bool) -> Live {
        console::set_colors_enabled_stderr(colour);
        let target = ProgressDrawTarget::term_like_with_hz(Box::new(Narrow(console::Term::buffered_stderr())), 20);
        let multi = MultiProgress::with_draw_target(target);
        let header = multi.add(ProgressBar::new(0));
        let style = ProgressStyle::with_template("[{pos}/{len}] {prefix} {msg} {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        header.set_style(style);
        header.enable_steady_tick(TICK);
        Live { multi, header, running: Mutex::new(HashMap::new()), colour }
    }

    fn task_bar(&self, task_ref: &str, title: &str) -> Running {
        let bar = self.multi.add(ProgressBar::new_spinner());
        let style = ProgressStyle::with_template("  {spinner} {prefix} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_prefix(for_terminal(task_ref).into_owned());
        let title = for_terminal(title).into_owned();
        bar.set_message(title.clone());
        bar.enable_steady_tick(TICK);
        Running { bar, title }
    }

    fn style(&self, state: TaskState) -> Style {
        let style = match state {
            TaskState::Succeeded | TaskState::Reused => Style::new().green(),
            TaskState::Failed => Style::new().red(),
            TaskState::EffectUnknown | TaskState::AwaitingApproval | TaskState::AwaitingInput => Style::new().yellow(),
            _ => Style::new().dim(),
        };
        style.force_styling(self.colour)
    }

    fn line(&self, text: &str) {
        // Printed above the bars; on a terminal that went away, nothing.
        let _ = self.multi.println(text);
    }
}

impl Sink for Live {
    fn update(&self, u: &Update) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match u {
            Update::Began { goal, revision, total, complete } => {
                self.header.set_length(*total as u64);
                self.header.set_position(*complete as u64);
                self.header.set_prefix(format!("goal {} r{revision}", for_terminal(goal.as_str())));
            }
            Update::TaskStarted { task_ref, title, .. } => {
                let line = self.task_bar(task_ref, title);
                if let Some(old) = running.insert(task_ref.to_string(), line) {
                    old.bar.finish_and_clear();
                }
            }
            Update::Validating { task_ref } => {
                if let Some(r) = running.get(*task_ref) {
                    r.bar.set_message(format!("{} — validating", r.title));
                }
            }
            Update::Note { task_ref, progress, total, message } => {
                // The line shows the provider's latest word, not a line per note.
                if let Some(r) = running.get(*task_ref) {
                    r.bar.set_message(format!("{} — {}", r.title, note_words(*progress, *total, *message)));
                }
            }
            Update::TaskEnded { task_ref, state, class, took, .. } => {
                if let Some(r) = running.remove(*task_ref) {
                    r.bar.finish_and_clear();
                    self.multi.remove(&r.bar);
                }
                if state.is_complete() {
                    self.header.inc(1);
                }
                let text = ended_line(task_ref, *state, class.map(|c| c.as_str()), *took);
                self.line(&self.style(*state).apply_to(text).to_string());
            }
            Update::Ended => {
                for (_, r) in running.drain() {
                    r.bar.finish_and_clear();
                }
                self.header.finish_and_clear();
                let _ = self.multi.clear();
            }
            other => {
                if let Some(text) = plain_line(other) {
                    self.line(&text);
                }
                if let Update::Stopping { signal, .. } = other {
                    self.header.set_message(format!("stopping ({signal})"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::GoalId;
    use crate::state::{FailureClass, StopSignal};

    #[test]
    fn plain_lines_say_what_happened_and_escape_what_the_plan_said() {
        let goal = GoalId::new("g");
        let began = Update::Began { goal: &goal, revision: crate::ids::Revision(2), total: 3, complete: 1 };
        assert_eq!(plain_line(&began).unwrap(), "goal g (revision 2): 3 tasks, 1 complete");
        let started = Update::TaskStarted { task_ref: "T1", title: "write \x1b[2Jtotal()", try_no: 1 };
        assert_eq!(plain_line(&started).unwrap(), "T1 started: write \\x1b[2Jtotal() (try 1)");
        let untitled = Update::TaskStarted { task_ref: "T1", title: "", try_no: 2 };
        assert_eq!(plain_line(&untitled).unwrap(), "T1 started (try 2)");
        let failed = Update::TaskEnded {
            task_ref: "T2",
            title: "t",
            state: TaskState::Failed,
            class: Some(FailureClass::ValidationFailed),
            took: Duration::from_millis(1234),
        };
        assert_eq!(plain_line(&failed).unwrap(), "T2 failed: validation_failed (1.2s)");
        let done = Update::TaskEnded {
            task_ref: "T1",
            title: "t",
            state: TaskState::Succeeded,
            class: None,
            took: Duration::from_millis(61_500),
        };
        assert_eq!(plain_line(&done).unwrap(), "T1 succeeded (1m 01s)");
        let stop =
            Update::Stopping { signal: StopSignal::Interrupt, in_flight: 2, groups: 1, grace: Duration::from_secs(5) };
        assert!(plain_line(&stop).unwrap().starts_with("SIGINT: stopping"));
        assert_eq!(plain_line(&Update::Ended), None);
        let note = Update::Note { task_ref: "T1", progress: 2.0, total: Some(3.0), message: Some("step\x1b[2J 2") };
        assert_eq!(plain_line(&note).unwrap(), "T1 progress 2/3 step\\x1b[2J 2");
        let bare = Update::Note { task_ref: "T1", progress: 0.4, total: None, message: None };
        assert_eq!(plain_line(&bare).unwrap(), "T1 progress 0.4");
        let forged = Update::Note { task_ref: "T1", progress: 1.0, total: None, message: Some("x\ngoal satisfied") };
        assert_eq!(plain_line(&forged).unwrap(), "T1 progress 1 x\\ngoal satisfied");
    }

    #[test]
    fn clock_and_durations() {
        assert_eq!(clock(Duration::from_millis(65_900)), "[01:05]");
        assert_eq!(took(Duration::from_millis(400)), "0.4s");
        assert_eq!(took(Duration::from_secs(185)), "3m 05s");
    }
}
