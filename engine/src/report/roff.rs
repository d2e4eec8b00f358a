//! A man page (the roff `clap_mangen` writes) as plain text for a
//! terminal: `engine man run` on a TTY reads like `man engine-run`, while a
//! pipe still gets the roff (`engine man run | man -l -`). Pure; only the
//! requests `clap_mangen` writes are known (`.TH .SH .SS .TP .IP .PP .LP .sp
//! .br .RS .RE .nf .fi .B .I`, font and character escapes); any other
//! request line is left out.

/// The indent of body text, and of a tagged paragraph's text.
const BODY: usize = 7;
const TAGGED: usize = 14;

/// The page as text, one roff line to one text line (no refilling).
pub fn to_text(roff: &str) -> String {
    let mut out = String::new();
    let mut indent = BODY;
    let mut extra = 0;
    // After `.TP`: the next text line is the tag.
    let mut tag_next = false;
    // Right after a heading: no blank line before its first paragraph.
    let mut fresh = true;
    // After `.IP MARK`: the next text line starts with it.
    let mut bullet: Option<String> = None;
    for line in roff.lines() {
        if let Some(request) = line.strip_prefix('.') {
            let (name, args) = request.split_once(' ').unwrap_or((request, ""));
            match name {
                "SH" | "SS" => {
                    push_blank(&mut out, false);
                    let head = unescape(args.trim_matches('"'));
                    out.push_str(&if name == "SH" { head } else { format!("   {head}") });
                    out.push('\n');
                    (indent, extra, tag_next, fresh) = (BODY, 0, false, true);
                }
                "TP" => {
                    push_blank(&mut out, fresh);
                    tag_next = true;
                }
                // A list item (`.IP \(bu 2`, inside `.RS`): a bullet at the
                // current indent, no blank line between items.
                "IP" => {
                    let mark = unescape(args.split_whitespace().next().unwrap_or(""));
                    bullet = (!mark.is_empty()).then(|| format!("{mark} "));
                }
                "PP" | "LP" | "P" | "sp" => {
                    push_blank(&mut out, fresh);
                    indent = BODY;
                }
                // A relative indent: the text under a tag stays under it.
                "RS" => extra = 2,
                "RE" => extra = 0,
                "B" | "I" => {
                    push_text(&mut out, indent + extra, &unescape(args.trim_matches('"')));
                    fresh = false;
                }
                _ => {}
            }
            continue;
        }
        let text = match bullet.take() {
            Some(mark) => format!("{mark}{}", unescape(line)),
            None => unescape(line),
        };
        fresh = false;
        if tag_next {
            push_text(&mut out, BODY + extra, &text);
            (indent, tag_next) = (TAGGED, false);
        } else {
            push_text(&mut out, indent + extra, &text);
        }
    }
    out.trim_start_matches('\n').to_string()
}

fn push_blank(out: &mut String, fresh: bool) {
    if !fresh && !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
}

fn push_text(out: &mut String, indent: usize, text: &str) {
    if text.trim().is_empty() {
        push_blank(out, false);
        return;
    }
    out.extend(std::iter::repeat_n(' ', indent));
    out.push_str(text);
    out.push('\n');
}

/// Font changes dropped, character escapes as the characters they name.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('f') => {
                // `\fB`, `\fI`, `\fR`, `\fP`, `\f(CW`.
                if chars.next() == Some('(') {
                    chars.next();
                    chars.next();
                }
            }
            Some('(') => {
                let name: String = chars.by_ref().take(2).collect();
                out.push_str(match name.as_str() {
                    "aq" => "'",
                    "dq" => "\"",
                    "em" => "—",
                    "en" => "–",
                    "bu" => "•",
                    "co" => "©",
                    _ => "",
                });
            }
            Some('*') => {
                // `\*(Aq` (clap_mangen's quote string) or `\*X`.
                if chars.next() == Some('(') {
                    let name: String = chars.by_ref().take(2).collect();
                    out.push_str(if name == "Aq" { "'" } else { "" });
                }
            }
            Some('-') => out.push('-'),
            Some('e') | Some('\\') => out.push('\\'),
            Some(' ') => out.push(' '),
            Some('&') | Some('c') | None => {}
            Some(other) => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_as_text_with_no_roff_left() {
        let roff = concat!(
            ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH engine-run 1  \"engine-run 0.1.0\" \n",
            ".SH NAME\nengine\\-run \\- Run a plan\n.SH OPTIONS\n.TP\n\\fB\\-\\-json\\fR\nPrint one JSON document\n",
            ".TP\n\\fB\\-\\-color\\fR \\fI<WHEN>\\fR\nIt\\*(Aqs colour\n.SH EXTRA\nExamples:\n.br\n  engine run plan.json\n",
        );
        let text = to_text(roff);
        let want = concat!(
            "NAME\n       engine-run - Run a plan\n\nOPTIONS\n       --json\n              Print one JSON document\n\n",
            "       --color <WHEN>\n              It's colour\n\nEXTRA\n       Examples:\n         engine run plan.json\n",
        );
        assert_eq!(text, want);
        assert!(!text.contains('\\') && !text.lines().any(|l| l.starts_with('.')), "{text}");
        let list = to_text(".TP\n--progress\nHow\n.RS 14\n.IP \\(bu 2\nauto: A\n.IP \\(bu 2\nplain: B\n.RE\n");
        assert!(list.ends_with("How\n                • auto: A\n                • plain: B\n"), "{list:?}");
    }
}
