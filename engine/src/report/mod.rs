//! Rendering for people (text) and scripts (JSON). Reads only; every word
//! printed says no more than the ledger holds (SPEC.md's state table).

pub mod acts;
pub mod document;
pub mod dry_run;
pub mod escape;
pub mod explain;
pub mod goal_report;
pub mod goals;
pub mod html;
pub mod init;
pub mod log;
pub mod next;
pub mod output;
pub mod paint;
pub mod person_acts;
pub mod plan;
pub mod progress;
pub mod question;
pub mod revise;
pub mod roff;
pub mod run;
pub mod standing;
pub mod status;
pub mod stderr;
pub mod stores;
pub mod words;

/// `engine --version`: the package version and the source commit.
pub const VERSION: &str = env!("ENGINE_VERSION_LINE");

/// What a command produced: text for people, JSON for scripts, and the
/// exit code. Each renderer builds its own; the CLI only prints it.
pub struct Output {
    pub text: String,
    pub json: serde_json::Value,
    pub exit_code: i32,
}

/// Write to stdout; a reader that went away (`engine log | head`) is not an
/// error worth a panic: the work is already recorded.
pub fn emit(text: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_ok()
}

/// `1 task`, `3 tasks`: a count with its noun in the number it takes.
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {}", number(n, noun))
}

/// `task` or `tasks`: the noun in the number `n` takes (never `task(s)`).
pub fn number(n: usize, noun: &str) -> String {
    match n {
        1 => noun.to_string(),
        _ => format!("{noun}s"),
    }
}

/// `s` left-aligned in a column of `width` characters (never shorter than
/// `s`). `format!`'s `{:width$}` panics on a width past 65,535; a table's
/// width comes from what it shows, so it is padded by hand.
pub fn pad(s: &str, width: usize) -> String {
    let len = s.chars().count();
    let mut out = String::with_capacity(s.len() + width.saturating_sub(len));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    out
}

/// The first 16 characters of a digest, as tables show it (all of a
/// shorter one: never a panic on what the ledger holds).
pub fn short(digest: &str) -> &str {
    digest.get(..16).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn a_count_takes_its_nouns_number() {
        // Issue 41: "goal completed (1 constraints not checked)".
        assert_eq!(count(1, "constraint"), "1 constraint");
        assert_eq!(count(0, "constraint"), "0 constraints");
        assert_eq!(count(3, "task"), "3 tasks");
    }

    #[test]
    fn pad_never_panics_on_wide_columns() {
        assert_eq!(super::pad("T1", 4), "T1  ");
        assert_eq!(super::pad("long", 2), "long");
        let wide = "r".repeat(70_000);
        assert_eq!(super::pad(&wide, 70_001).len(), 70_001);
    }
}
