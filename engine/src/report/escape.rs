//! What a terminal must never receive from a provider: control characters.
//! Provider output (and anything a plan or a provider named) can carry
//! escape sequences that clear the screen, retitle the window, write the
//! clipboard (OSC 52) or overwrite what was printed (CR, backspace). Human
//! output passes through `for_terminal` once, where it is printed; `--json`
//! keeps the bytes (JSON's own escaping makes them inert there).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character shown as an escape: C0 controls
/// (ESC as `\x1b`, CR as `\r`, BEL, backspace, ...), DEL, C1 controls
/// (U+0080–U+009F, `\u{9b}`), and the bidirectional overrides and isolates
/// that reorder what a reader sees. Newline and tab are layout and stay.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c) {
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

fn needs_escape(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true,
        // Bidi embeddings, overrides and isolates (Trojan Source).
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::for_terminal;

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
    fn layout_and_plain_text_pass_untouched() {
        let plain = "line 1\n\tline 2 — ünïcode ✓ \\x1b stays literal\n";
        assert!(matches!(for_terminal(plain), std::borrow::Cow::Borrowed(_)));
        assert_eq!(for_terminal(plain), plain);
    }
}
