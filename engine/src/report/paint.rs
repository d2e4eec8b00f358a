//! Colour for people (`--color auto|always|never`). Renderers write plain
//! text; the CLI escapes it (`escape::for_terminal`) and then paints it
//! here, so every escape byte in what is printed is one of these colours,
//! never one a provider or a plan sent.
//!
//! `auto` paints a stream that is a terminal, unless `NO_COLOR` is set to
//! anything but the empty string (no-color.org) or `TERM` is `dumb`;
//! `always` paints whatever the stream is (a person asked: it outranks
//! `NO_COLOR`); `never` paints nothing. `--json` is never painted.
//!
//! What is painted, line by line: the `next:` / `or:` labels and the
//! commands in backticks; a run's verdict line (`goal satisfied` green, a
//! stop red); an `error:` and its code; and state words (`succeeded`,
//! `failed`, `awaiting_approval`, …) wherever they stand as a word —
//! except in the lines that quote a provider's output (`| …`).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

use console::Style;

/// The person's choice (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Always,
    Never,
}

/// Which streams are painted: bit 0 stdout, bit 1 stderr. Set once, by the
/// CLI, before anything is printed.
static PAINTED: AtomicU8 = AtomicU8::new(0);

/// Decide, for this process, which streams get colour.
pub fn choose(choice: Choice) {
    let env_allows = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let on = |terminal: bool| match choice {
        Choice::Always => true,
        Choice::Never => false,
        Choice::Auto => terminal && env_allows,
    };
    let bits = u8::from(on(std::io::stdout().is_terminal())) | (u8::from(on(std::io::stderr().is_terminal())) << 1);
    PAINTED.store(bits, Ordering::Relaxed);
}

/// Is stdout painted?
pub fn stdout() -> bool {
    PAINTED.load(Ordering::Relaxed) & 1 != 0
}

/// Is stderr painted (errors, progress)?
pub fn stderr() -> bool {
    PAINTED.load(Ordering::Relaxed) & 2 != 0
}

/// `text` (already escaped) painted for stdout, if stdout is painted.
pub fn text(text: &str) -> String {
    if stdout() {
        paint(text)
    } else {
        text.to_string()
    }
}

/// An error line (already escaped) painted for stderr, if stderr is.
pub fn error(line: &str) -> String {
    match stderr() {
        true => paint_error(line),
        false => line.to_string(),
    }
}

/// `error: CODE: …` with its head and code in red.
fn paint_error(line: &str) -> String {
    let (head, rest) = line.split_once(": ").unwrap_or((line, ""));
    let bad = Style::new().red().bold().force_styling(true);
    match rest.split_once(": ") {
        Some((code, tail)) if is_code(code) => format!("{}: {}: {tail}", bad.apply_to(head), bad.apply_to(code)),
        _ if rest.is_empty() => bad.apply_to(head).to_string(),
        _ => format!("{}: {rest}", bad.apply_to(head)),
    }
}

/// Paint every line of `text`.
pub fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&paint_line(line));
    }
    out
}

/// A stable code: `EXTERNAL_EFFECT_UNKNOWN`, `PLAN_INVALID`.
fn is_code(word: &str) -> bool {
    word.len() > 2 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

fn paint_line(line: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    // A provider's output, quoted: shown as it is.
    if body.starts_with("| ") || body == "|" {
        return line.to_string();
    }
    let good = Style::new().green().bold().force_styling(true);
    let bad = Style::new().red().bold().force_styling(true);
    if body.starts_with("goal satisfied") || body.starts_with("goal completed") {
        return format!("{indent}{}", good.apply_to(body));
    }
    for label in ["next:", "or:"] {
        if let Some(rest) = body.strip_prefix(label) {
            let cyan = Style::new().cyan().bold().force_styling(true);
            return format!("{indent}{}{}", cyan.apply_to(label), words(rest));
        }
    }
    if let Some((head, rest)) = body.split_once(':') {
        if is_code(head) || head == "stopped" || head.starts_with("stopped by") || head == "goal not satisfied" {
            return format!("{indent}{}:{}", bad.apply_to(head), words(rest));
        }
    }
    format!("{indent}{}", words(body))
}

/// State words coloured where they stand as words; a command in backticks
/// in bold, its words left alone.
fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let mut quoted = false;
    let flush = |word: &mut String, out: &mut String| {
        match state_style(word) {
            Some(style) => out.push_str(&style.apply_to(word.as_str()).to_string()),
            None => out.push_str(word),
        }
        word.clear();
    };
    let bold = Style::new().bold().force_styling(true);
    let mut command = String::new();
    for c in text.chars() {
        if quoted {
            if c == '`' {
                out.push_str(&bold.apply_to(format!("`{command}`")).to_string());
                command.clear();
                quoted = false;
            } else {
                command.push(c);
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        if c == '`' {
            quoted = true;
        } else {
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    if quoted {
        // An unmatched backtick: as it was.
        out.push('`');
        out.push_str(&command);
    }
    out
}

fn state_style(word: &str) -> Option<Style> {
    let style = Style::new().force_styling(true);
    match word {
        "succeeded" | "passed" | "satisfied" | "kept" | "reused" | "settled_ok" => Some(style.green()),
        "failed" | "FAILED" | "VIOLATED" | "effect_unknown" | "needs_settlement" | "killed" => Some(style.red()),
        "awaiting_approval" | "pending" | "blocked" | "cancelled" | "running" | "in_doubt" | "settled_not_run"
        | "dispatched" | "intent_recorded" => Some(style.yellow()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        console::strip_ansi_codes(s).into_owned()
    }

    #[test]
    fn painting_changes_no_character_a_person_reads() {
        let text = "goal g (revision 1)\n  A  succeeded\n  B  failed  provider_rejected (action_exit_nonzero)\n    \
                    next: `engine repair B --force --note \"…\"`\n      or: fix it, then `engine revise p.json`\n\
                    stopped: task failed: B\n      | failed in the provider's words\n";
        let painted = paint(text);
        assert_ne!(painted, text);
        assert_eq!(plain(&painted), text);
    }

    #[test]
    fn states_commands_and_verdicts_are_coloured_and_quoted_output_is_not() {
        assert!(paint("  A  failed").contains("\u{1b}[31mfailed"));
        assert!(paint("goal satisfied: every task").starts_with("\u{1b}[32m\u{1b}[1mgoal satisfied"));
        assert!(paint("    next: `engine retry T`").contains("\u{1b}[1m`engine retry T`"));
        // A state word inside a command stays the command's.
        assert!(!paint("next: `engine settle op --outcome failed`").contains("\u{1b}[31m"));
        assert_eq!(paint("      | failed"), "      | failed");
        // Part of a longer word is not a state word.
        assert_eq!(paint("unfailedness"), "unfailedness");
        assert_eq!(plain(&paint("an `unmatched backtick")), "an `unmatched backtick");
    }

    #[test]
    fn an_error_line_paints_its_head_and_code() {
        let line = paint_error("error: PLAN_INVALID: expected `,` (at p.json:1:2)");
        assert!(line.contains("\u{1b}[31m\u{1b}[1merror"), "{line:?}");
        assert!(line.contains("\u{1b}[31m\u{1b}[1mPLAN_INVALID"), "{line:?}");
        assert_eq!(plain(&line), "error: PLAN_INVALID: expected `,` (at p.json:1:2)");
    }
}
