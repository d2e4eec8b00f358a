//! What a terminal must never receive from a provider: control characters
//! and the characters that reorder what a reader sees. Provider output
//! (and anything a plan or a provider named) can carry escape sequences
//! that clear the screen, retitle the window, write the clipboard (OSC 52)
//! or overwrite what was printed (CR, backspace), and bidirectional
//! controls that make text read other than it is (Trojan Source). Human
//! output passes through `for_terminal` once, where it is printed; `--json`
//! keeps every string's value but writes those characters as JSON escapes
//! (`\u009b`, `\u202e`), so a person paging through it sees the escape and
//! a script reads the same string (`json_pretty`, `json_line`). The HTML
//! page marks the same characters up (`html::escape`).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every hidden character (`hidden`) shown as an escape: ESC
/// as `\x1b`, CR as `\r`, BEL, backspace, ..., DEL, C1 controls as
/// `\u{9b}`, bidirectional controls as `\u{202e}`. Newline and tab are
/// layout and stay.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !hidden(c) {
            out.push(c);
            continue;
        }
        // Writing to a String cannot fail.
        let _ = match c {
            '\r' => write!(out, "\\r"),
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// The characters never shown as themselves, in any output: C0 controls
/// but newline and tab, DEL, C1 controls (U+0080–U+009F: U+009B is a
/// terminal's CSI), the bidirectional controls — marks (U+061C, U+200E,
/// U+200F), embeddings and overrides (U+202A–U+202E), isolates
/// (U+2066–U+2069) — and the non-characters U+FFFE and U+FFFF.
pub fn hidden(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true,
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        '\u{fffe}' | '\u{ffff}' => true,
        _ => false,
    }
}

/// `value` as `--json` prints it: pretty JSON whose hidden characters are
/// JSON escapes (`\u202e`), the same string to any JSON reader.
pub fn json_pretty(value: &serde_json::Value) -> String {
    inert(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// `value` as one line of JSON (`engine log --follow --json`), escaped as
/// `json_pretty` is.
pub fn json_line(value: &impl serde::Serialize) -> String {
    inert(serde_json::to_string(value).unwrap_or_default())
}

/// JSON text with its hidden characters written as `\uXXXX`. JSON's own
/// writer escapes C0 controls, and everything outside a string is ASCII
/// (newlines and spaces of the layout among it), so every other hidden
/// character stands inside a string, where its escape means the same.
fn inert(json: String) -> String {
    if !json.chars().any(hidden) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if hidden(c) {
            // Every hidden character is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{for_terminal, hidden, json_line, json_pretty};

    #[test]
    fn terminal_sequences_are_shown_not_sent() {
        let osc52 = "\x1b]52;c;aGk=\x07";
        assert_eq!(for_terminal(osc52), "\\x1b]52;c;aGk=\\x07");
        assert_eq!(for_terminal("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
        assert_eq!(for_terminal("ok\rFAIL\x08\x08"), "ok\\rFAIL\\x08\\x08");
        assert_eq!(for_terminal("\x00\x7f\u{9b}31m"), "\\x00\\x7f\\u{9b}31m");
        assert_eq!(for_terminal("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn bidi_marks_and_non_characters_are_shown_too() {
        assert_eq!(for_terminal("a\u{200f}b\u{61c}c\u{2067}d\u{ffff}"), "a\\u{200f}b\\u{61c}c\\u{2067}d\\u{ffff}");
    }

    #[test]
    fn json_keeps_every_value_and_writes_hidden_characters_as_escapes() {
        let value =
            serde_json::json!({"out\u{202e}": ["\u{9b}31m red", "tab\there", "\u{1b}]52;c;x\u{7}", "\u{7f}", "ünï ✓"]});
        for text in [json_pretty(&value), json_line(&value)] {
            assert!(!text.chars().any(hidden), "{text:?}");
            assert!(text.contains("\\u009b31m red") && text.contains("out\\u202e"), "{text}");
            assert!(text.contains("ünï ✓"), "other text stays itself: {text}");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&text).unwrap(),
                value,
                "the same strings to a reader"
            );
        }
    }

    #[test]
    fn layout_and_plain_text_pass_untouched() {
        let plain = "line 1\n\tline 2 — ünïcode ✓ \\x1b stays literal\n";
        assert!(matches!(for_terminal(plain), std::borrow::Cow::Borrowed(_)));
        assert_eq!(for_terminal(plain), plain);
    }
}
