//! Escaping every ledger string for HTML. Text from providers may hold
//! markup and terminal escapes: markup becomes text, and control
//! characters become visible (`\x1b`), never bytes a terminal or the
//! browser would act on. Pure.

use std::fmt::Write;

/// Characters shown as a visible escape instead of themselves: the same
/// as in every other output (`report::escape::hidden`).
fn is_hidden(c: char) -> bool {
    crate::report::escape::hidden(c)
}

fn visible(c: char) -> String {
    let n = c as u32;
    if n < 0x100 {
        format!("\\x{n:02x}")
    } else {
        format!("\\u{{{n:x}}}")
    }
}

fn push_char(out: &mut String, c: char, mark_hidden: bool) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c if is_hidden(c) && mark_hidden => {
            let _ = write!(out, "<span class=\"ctl\">{}</span>", visible(c));
        }
        c if is_hidden(c) => out.push_str(&visible(c)),
        c => out.push(c),
    }
}

/// Text content: markup escaped, hidden characters shown marked up as
/// `<span class="ctl">\x1b</span>` so a reader tells them from a provider
/// that printed a backslash.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        push_char(&mut out, c, true);
    }
    out
}

/// An attribute value (always written in double quotes): hidden
/// characters as plain `\x1b`.
pub fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        push_char(&mut out, c, false);
    }
    out
}

/// At most `chars_max` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, chars_max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(chars_max) {
        None => s.into(),
        Some((i, _)) => format!("{}…", &s[..i]).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_text() {
        let s = "<script>alert(1)</script><img src=x onerror=\"a()\">&'";
        let t = text(s);
        assert!(!t.contains('<') && !t.contains('>') && !t.contains('"'), "{t}");
        assert_eq!(t, "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;a()&quot;&gt;&amp;&#39;");
        assert_eq!(attr(s), t);
    }

    #[test]
    fn terminal_escapes_are_visible() {
        // CSI colour, OSC window title ended by BEL, a C1 CSI, a bidi override.
        let s = "\x1b[31mred\x1b[0m \x1b]0;owned\x07 \u{9b}2J \u{202e}txt";
        let t = text(s);
        assert!(!t.chars().any(|c| c == '\x1b' || c == '\x07' || c == '\u{9b}' || c == '\u{202e}'), "{t:?}");
        assert!(t.contains(r#"<span class="ctl">\x1b</span>[31mred"#), "{t}");
        assert!(t.contains(r#"<span class="ctl">\x1b</span>]0;owned<span class="ctl">\x07</span>"#), "{t}");
        assert!(t.contains(r#"<span class="ctl">\x9b</span>2J"#), "{t}");
        assert!(t.contains(r#"<span class="ctl">\u{202e}</span>txt"#), "{t}");
        assert_eq!(attr("\x1b]0;t\x07"), r"\x1b]0;t\x07");
        // Newlines and tabs stay what they are.
        assert_eq!(text("a\n\tb"), "a\n\tb");
    }

    #[test]
    fn clip_cuts_on_characters() {
        assert_eq!(clip("héllo", 10), "héllo");
        assert_eq!(clip("héllo", 2), "hé…");
    }
}
