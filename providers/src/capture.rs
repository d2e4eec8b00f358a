//! Bounded capture of a byte stream (a child's stdout/stderr, an HTTP body).
//!
//! The capture keeps at most `max` bytes — the first half and the last half
//! of the stream — but keeps reading (and counting) past the bound, so a
//! child never blocks on a full pipe, and what a program says last (an
//! agent's report line, a traceback's last frame) is never the part lost.
//! Truncation is never silent: `truncated`, `total_bytes` and `omitted`
//! say what was dropped, and where.

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::io;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

/// What replaces a secret in captured output.
pub const REDACTED: &str = "[REDACTED]";

/// A captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// The kept bytes, as UTF-8 (invalid sequences replaced by U+FFFD).
    pub text: String,
    /// How many bytes the stream really produced (as far as it was read).
    pub total_bytes: u64,
    /// `text` is not the whole stream: the bound was hit, or reading was
    /// abandoned before EOF.
    pub truncated: bool,
    /// The middle of the stream that was not kept: `text[..at]` is its
    /// head, `text[at..]` its tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// A gap in a capture: `bytes` of the stream dropped at byte `at` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    pub at: usize,
    pub bytes: u64,
}

impl Captured {
    /// Build from raw kept bytes. When truncated, an incomplete UTF-8
    /// sequence at the cut is dropped rather than turned into U+FFFD, so the
    /// text ends on a character boundary (this matters for `redact`).
    pub fn from_bytes(mut kept: Vec<u8>, total_bytes: u64, truncated: bool) -> Self {
        if truncated {
            drop_cut_char_at_end(&mut kept);
        }
        Captured { text: String::from_utf8_lossy(&kept).into_owned(), total_bytes, truncated, omitted: None }
    }

    /// Build from a stream's head and tail with `omitted` bytes dropped
    /// between them; a character cut by either edge of the gap is dropped
    /// (and one cut at the end, when reading stopped short).
    pub fn from_head_and_tail(
        mut head: Vec<u8>,
        mut tail: Vec<u8>,
        omitted: u64,
        total_bytes: u64,
        cut_at_end: bool,
    ) -> Self {
        if omitted == 0 {
            head.append(&mut tail);
            return Captured::from_bytes(head, total_bytes, cut_at_end);
        }
        drop_cut_char_at_end(&mut head);
        // Continuation bytes at the tail's start belong to a character the
        // gap cut (a UTF-8 character is at most 4 bytes).
        let cut = tail.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
        tail.drain(..cut);
        if cut_at_end {
            drop_cut_char_at_end(&mut tail);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let at = head.len();
        let text = head + &String::from_utf8_lossy(&tail);
        Captured { text, total_bytes, truncated: true, omitted: Some(Omitted { at, bytes: omitted }) }
    }

    /// The head and the tail (the tail is everything when nothing was omitted).
    pub fn parts(&self) -> (&str, &str) {
        match self.omitted {
            Some(o) if self.text.is_char_boundary(o.at) => self.text.split_at(o.at),
            _ => ("", &self.text),
        }
    }

    /// Replace every occurrence of each non-empty secret with `[REDACTED]`.
    /// A cut may have split a secret: a piece at an edge of the gap (or at
    /// the end of a truncated text) that could be part of one is redacted
    /// too.
    pub fn redact(&mut self, secrets: &[String]) {
        let mut secrets: Vec<&str> = secrets.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
        // Longest first, so a secret containing a shorter one is still found
        // whole.
        secrets.sort_by_key(|s| Reverse(s.len()));
        let (head, tail) = self.parts();
        let (mut head, mut tail) = (redact_whole(head, &secrets), redact_whole(tail, &secrets));
        if self.omitted.is_some() {
            redact_cut_end(&mut head, &secrets);
            redact_cut_start(&mut tail, &secrets);
        }
        if self.truncated {
            redact_cut_end(&mut tail, &secrets);
        }
        if let Some(o) = &mut self.omitted {
            o.at = head.len();
        }
        self.text = head + &tail;
    }
}

/// A message with every secret in it redacted.
pub(crate) fn redact_text(text: String, secrets: &[String]) -> String {
    let mut c = Captured { text, total_bytes: 0, truncated: false, omitted: None };
    c.redact(secrets);
    c.text
}

/// An incomplete UTF-8 sequence at the end ("valid so far, then cut
/// short") is dropped.
fn drop_cut_char_at_end(bytes: &mut Vec<u8>) {
    if let Err(e) = std::str::from_utf8(bytes) {
        if e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        }
    }
}

fn redact_whole(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if out.contains(s) {
            out = out.replace(s, REDACTED);
        }
    }
    out
}

/// A text cut short: a tail that is a proper prefix of a secret is redacted.
fn redact_cut_end(text: &mut String, secrets: &[&str]) {
    for s in secrets {
        // Proper prefixes of `s` on char boundaries, longest first.
        let cut = s.char_indices().map(|(i, _)| i).filter(|&i| i > 0).rev().find(|&i| text.ends_with(&s[..i]));
        if let Some(i) = cut {
            let keep = text.len() - i;
            text.truncate(keep);
            text.push_str(REDACTED);
        }
    }
}

/// A text whose start was cut: a head that is a proper suffix of a secret
/// is redacted.
fn redact_cut_start(text: &mut String, secrets: &[&str]) {
    for s in secrets {
        let cut = s.char_indices().map(|(i, _)| i).filter(|&i| i > 0).find(|&i| text.starts_with(&s[i..]));
        if let Some(i) = cut {
            text.replace_range(..s.len() - i, REDACTED);
        }
    }
}

/// How much one read takes from a stream.
const CHUNK: usize = 64 * 1024;

/// An accumulating bounded buffer: the first half of the bound, then a
/// window over the last half. Kept separate from the read loop so a caller
/// that abandons reading (e.g. after a timeout) still has what was read.
#[derive(Debug)]
pub struct Bounded {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    /// Bytes dropped between head and tail.
    omitted: u64,
    total: u64,
    /// Reading stopped before EOF (error or abandoned).
    incomplete: bool,
}

impl Bounded {
    pub fn new(max: usize) -> Self {
        let head_max = max / 2;
        Bounded {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max: max - head_max,
            omitted: 0,
            total: 0,
            incomplete: false,
        }
    }

    /// Count a chunk; keep it in the head while there is room, then in the
    /// tail window (dropping the window's oldest bytes).
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_max.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(chunk.len().min(room));
        self.head.extend_from_slice(to_head);
        // Only the last `tail_max` bytes of `rest` can stay.
        let skip = rest.len().saturating_sub(self.tail_max);
        self.omitted += skip as u64;
        let rest = &rest[skip..];
        self.tail.extend(rest);
        let over = self.tail.len().saturating_sub(self.tail_max);
        self.tail.drain(..over);
        self.omitted += over as u64;
    }

    /// Read `r` to EOF into this buffer. Cancel-safe: dropping the future
    /// loses no byte that was already read. A read error ends the stream and
    /// marks the capture incomplete.
    pub async fn drain_from<R: AsyncRead + Unpin + ?Sized>(&mut self, r: &mut R) -> io::Result<()> {
        // Pessimistic until EOF, so a cancelled drain is reported as such.
        self.incomplete = true;
        // Read into spare capacity: zeroing a 64 KiB buffer per stream
        // cost 130,000 instructions per provider process (two streams), 8%
        // of the engine's for a chain of `true` tasks.
        let mut chunk = Vec::with_capacity(CHUNK);
        loop {
            chunk.clear();
            let n = r.read_buf(&mut chunk).await?;
            if n == 0 {
                self.incomplete = false;
                return Ok(());
            }
            self.push(&chunk[..n]);
        }
    }

    pub fn finish(self) -> Captured {
        Captured::from_head_and_tail(self.head, Vec::from(self.tail), self.omitted, self.total, self.incomplete)
    }
}

/// Read `r` to EOF, keeping at most `max` bytes and counting all of them.
pub async fn read_bounded<R: AsyncRead + Unpin>(mut r: R, max: usize) -> io::Result<Captured> {
    let mut b = Bounded::new(max);
    b.drain_from(&mut r).await?;
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[tokio::test]
    async fn keeps_bound_and_counts_all() {
        let data = vec![b'a'; 10_000];
        let c = read_bounded(&data[..], 100).await.unwrap();
        assert_eq!(c.text.len(), 100);
        assert_eq!(c.total_bytes, 10_000);
        assert!(c.truncated);
        assert_eq!(c.omitted, Some(Omitted { at: 50, bytes: 9_900 }));

        let c = read_bounded(&b"hello"[..], 100).await.unwrap();
        assert_eq!(c, Captured { text: "hello".into(), total_bytes: 5, truncated: false, omitted: None });
    }

    #[tokio::test]
    async fn keeps_the_head_and_the_tail_across_many_chunks() {
        // 0..=9 repeated, pushed in uneven chunks: the last line survives.
        let mut data: Vec<u8> = (0..100_000u32).map(|i| b'0' + (i % 10) as u8).collect();
        data.extend_from_slice(b"\nREPORT");
        let mut b = Bounded::new(64);
        for chunk in data.chunks(7) {
            b.push(chunk);
        }
        let c = b.finish();
        assert_eq!(c.parts(), ("01234567890123456789012345678901", "5678901234567890123456789\nREPORT"));
        assert_eq!(c.omitted, Some(Omitted { at: 32, bytes: data.len() as u64 - 64 }));
        assert_eq!(c.total_bytes, data.len() as u64);
    }

    #[test]
    fn characters_cut_by_the_gap_are_dropped() {
        // "é" is 2 bytes: the head ends in its first, the tail starts with
        // the second byte of another.
        let c = Captured::from_head_and_tail(b"ab\xc3".to_vec(), b"\xa9cd".to_vec(), 10, 16, false);
        assert_eq!(c.parts(), ("ab", "cd"));
    }

    #[test]
    fn a_secret_split_by_the_gap_is_redacted_on_both_sides() {
        let mut c =
            Captured::from_head_and_tail(b"key=super".to_vec(), b"cret; again supersecret".to_vec(), 100, 130, false);
        c.redact(&s(&["supersecret"]));
        assert_eq!(c.parts(), ("key=[REDACTED]", "[REDACTED]; again [REDACTED]"));
    }

    #[test]
    fn cut_inside_utf8_char_is_dropped() {
        let bytes = "aé".as_bytes(); // 'é' is 2 bytes
        let c = Captured::from_bytes(bytes[..2].to_vec(), 3, true);
        assert_eq!(c.text, "a");
    }

    #[test]
    fn redacts_every_occurrence() {
        let mut c = Captured::from_bytes(b"tok=abc123 again abc123".to_vec(), 23, false);
        c.redact(&s(&["abc123", ""]));
        assert_eq!(c.text, "tok=[REDACTED] again [REDACTED]");
    }

    #[test]
    fn longer_secret_wins_over_substring() {
        let mut c = Captured::from_bytes(b"x abcdef y".to_vec(), 10, false);
        c.redact(&s(&["abc", "abcdef"]));
        assert_eq!(c.text, "x [REDACTED] y");
    }

    #[test]
    fn redacts_secret_split_by_truncation() {
        let mut c = Captured::from_bytes(b"token: supersec".to_vec(), 100, true);
        c.redact(&s(&["supersecret"]));
        assert_eq!(c.text, "token: [REDACTED]");
        // Not truncated: a tail that merely looks like a prefix is left alone.
        let mut c = Captured::from_bytes(b"token: supersec".to_vec(), 15, false);
        c.redact(&s(&["supersecret"]));
        assert_eq!(c.text, "token: supersec");
    }
}
