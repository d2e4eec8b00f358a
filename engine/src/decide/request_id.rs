//! `--request-id`: a caller that repeats a command after losing its reply
//! must not act twice. The engine keeps each id with the fingerprint of the
//! command it was given for (the command, its arguments, the user); the
//! same id with the same fingerprint is a repeat (the first answer is given
//! back, nothing changes), with another fingerprint a conflict.

use serde_json::{json, Value};
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::digest::{Digester, Kind};
use crate::limits::REQUEST_ID_BYTES_MAX;

/// What a command given under a request id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The id is new: do the command, and keep its answer.
    New,
    /// The same command again: give the first answer back.
    Repeat,
    /// The id names another command: refuse (`REQUEST_ID_CONFLICT`).
    Conflict,
}

/// `recorded`: the fingerprint the id was first given with, if it was.
pub fn judge(recorded: Option<&str>, fingerprint: &str) -> Judgement {
    match recorded {
        None => Judgement::New,
        Some(f) if f == fingerprint => Judgement::Repeat,
        Some(_) => Judgement::Conflict,
    }
}

/// The command as the id binds it: its name, its arguments (those that
/// change what it does: not `--json`, not `--jobs`) and the user giving it.
pub fn command(name: &str, args: Value, user: &str) -> Value {
    json!({"command": name, "args": args, "user": user})
}

/// The fingerprint of a command (`command`).
pub fn fingerprint(command: &Value) -> String {
    Digester::new(Kind::RequestFingerprint).json("command", command).finish()
}

/// A request id a caller may give: not empty, at most
/// `REQUEST_ID_BYTES_MAX` bytes, no whitespace, control or format
/// characters (Unicode's `Cf`: the bidirectional controls, such as U+202E,
/// and the invisible ones, which make two ids look alike or one read
/// backwards).
pub fn well_formed(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("a request id is not empty".into());
    }
    if id.len() > REQUEST_ID_BYTES_MAX {
        return Err(format!("a request id is at most {REQUEST_ID_BYTES_MAX} bytes; this one is {}", id.len()));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a request id has no whitespace or control characters".into());
    }
    if let Some(c) = id.chars().find(|c| c.general_category() == GeneralCategory::Format) {
        return Err(format!(
            "a request id has no format characters (bidirectional controls, invisible characters): it holds U+{:04X}",
            c as u32
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_repeat_and_conflict() {
        let f = fingerprint(&command("approve", json!({"operation_id": "op", "note": "n"}), "alice"));
        assert_eq!(judge(None, &f), Judgement::New);
        assert_eq!(judge(Some(&f), &f), Judgement::Repeat);
        let other = fingerprint(&command("approve", json!({"operation_id": "op", "note": "m"}), "alice"));
        assert_eq!(judge(Some(&f), &other), Judgement::Conflict);
    }

    #[test]
    fn the_fingerprint_covers_command_arguments_and_user_not_key_order() {
        let base = fingerprint(&command("settle", json!({"a": 1, "b": "x"}), "alice"));
        assert_eq!(base, fingerprint(&command("settle", json!({"b": "x", "a": 1}), "alice")));
        assert_ne!(base, fingerprint(&command("retry", json!({"a": 1, "b": "x"}), "alice")));
        assert_ne!(base, fingerprint(&command("settle", json!({"a": 2, "b": "x"}), "alice")));
        assert_ne!(base, fingerprint(&command("settle", json!({"a": 1, "b": "x"}), "bob")));
        assert_ne!(base, fingerprint(&command("settle", json!({"a": 1, "b": "x", "c": null}), "alice")));
    }

    #[test]
    fn ids_are_bounded_and_printable() {
        assert_eq!(well_formed("4f1c-retry-7"), Ok(()));
        assert!(well_formed("").is_err());
        assert!(well_formed("a b").is_err());
        assert!(well_formed("a\u{1b}[2J").is_err());
        for hidden in ['\u{202e}', '\u{2066}', '\u{200f}', '\u{61c}', '\u{200b}', '\u{feff}', '\u{e0041}'] {
            let why = well_formed(&format!("ab{hidden}cd")).unwrap_err();
            assert!(why.contains(&format!("U+{:04X}", hidden as u32)), "{why}");
        }
        assert_eq!(well_formed("räksmörgås-日本-7"), Ok(()), "letters of any script are fine");
        assert_eq!(well_formed(&"x".repeat(REQUEST_ID_BYTES_MAX)), Ok(()));
        assert!(well_formed(&"x".repeat(REQUEST_ID_BYTES_MAX + 1)).is_err());
    }
}
