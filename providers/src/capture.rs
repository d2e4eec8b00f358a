//! Bounded capture of a byte stream (a child's stdout/stderr, an HTTP body).
//!
//! The capture keeps at most `max` bytes but keeps reading (and counting) past
//! the bound, so a child never blocks on a full pipe. Truncation is never
//! silent: `truncated` and `total_bytes` say what was dropped.

use std::cmp::Reverse;
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
}

impl Captured {
    /// Build from raw kept bytes. When truncated, an incomplete UTF-8
    /// sequence at the cut is dropped rather than turned into U+FFFD, so the
    /// text ends on a character boundary (this matters for `redact`).
    pub fn from_bytes(mut kept: Vec<u8>, total_bytes: u64, truncated: bool) -> Self {
        if truncated {
            if let Err(e) = std::str::from_utf8(&kept) {
                // `error_len() == None` means "valid so far, then cut short".
                if e.error_len().is_none() {
                    kept.truncate(e.valid_up_to());
                }
            }
        }
        Captured { text: String::from_utf8_lossy(&kept).into_owned(), total_bytes, truncated }
    }

    /// Replace every occurrence of each non-empty secret with `[REDACTED]`.
    /// If the capture was truncated, the cut may have split a secret: a tail
    /// of the text that is a prefix of some secret is redacted too.
    pub fn redact(&mut self, secrets: &[String]) {
        let mut secrets: Vec<&str> = secrets.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
        // Longest first, so a secret containing a shorter one is still found
        // whole.
        secrets.sort_by_key(|s| Reverse(s.len()));
        for s in &secrets {
            if self.text.contains(s) {
                self.text = self.text.replace(s, REDACTED);
            }
        }
        if !self.truncated {
            return;
        }
        for s in &secrets {
            // Proper prefixes of `s` on char boundaries, longest first.
            let cut = s.char_indices().map(|(i, _)| i).filter(|&i| i > 0).rev().find(|&i| self.text.ends_with(&s[..i]));
            if let Some(i) = cut {
                let keep = self.text.len() - i;
                self.text.truncate(keep);
                self.text.push_str(REDACTED);
            }
        }
    }
}

/// An accumulating bounded buffer. Kept separate from the read loop so a
/// caller that abandons reading (e.g. after a timeout) still has what was
/// read so far.
#[derive(Debug)]
pub struct Bounded {
    kept: Vec<u8>,
    total: u64,
    max: usize,
    /// Reading stopped before EOF (error or abandoned).
    incomplete: bool,
}

impl Bounded {
    pub fn new(max: usize) -> Self {
        Bounded { kept: Vec::new(), total: 0, max, incomplete: false }
    }

    /// Count a chunk; keep it only up to the bound.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.max.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Read `r` to EOF into this buffer. Cancel-safe: dropping the future
    /// loses no byte that was already read. A read error ends the stream and
    /// marks the capture incomplete.
    pub async fn drain_from<R: AsyncRead + Unpin + ?Sized>(&mut self, r: &mut R) -> io::Result<()> {
        // Pessimistic until EOF, so a cancelled drain is reported as such.
        self.incomplete = true;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = r.read(&mut chunk).await?;
            if n == 0 {
                self.incomplete = false;
                return Ok(());
            }
            self.push(&chunk[..n]);
        }
    }

    pub fn finish(self) -> Captured {
        let truncated = self.incomplete || self.total > self.kept.len() as u64;
        Captured::from_bytes(self.kept, self.total, truncated)
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

        let c = read_bounded(&b"hello"[..], 100).await.unwrap();
        assert_eq!(c, Captured { text: "hello".into(), total_bytes: 5, truncated: false });
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
