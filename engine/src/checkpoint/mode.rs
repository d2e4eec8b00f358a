//! A look's entry for one path: its content digest and, since the look
//! records it, the path's permission bits (`st_mode & 0o7777`), as
//! `<digest>;mode=<octal>`. Landlock has no right for `chmod`, so only a
//! look sees a mode change. An entry stored before modes were recorded
//! (a baseline in an older ledger, judged after an upgrade) has none: it
//! compares on content alone, never a false change. Reuse (a task's
//! inputs) records content only; this is the trust check's. Pure.

use std::borrow::Cow;

/// What separates an entry's digest from its mode.
const MODE: &str = ";mode=";

/// `digest` with the permission bits of `mode` recorded beside it.
pub fn with_mode(digest: String, mode: u32) -> String {
    use std::fmt::Write;
    let mut out = digest;
    out.reserve(MODE.len() + 5);
    let _ = write!(out, "{MODE}{:04o}", mode & 0o7777);
    out
}

/// A link's entry: its target's digest, marked as a link (a link has no
/// mode of its own on Linux). The mark keeps a file whose bytes are the
/// link's recorded text from comparing as the link: both sides of a new
/// look carry a mark, so they are compared on it too.
pub fn link(digest: String) -> String {
    let mut out = digest;
    out.push_str(MODE);
    out.push_str("link");
    out
}

/// A special file's entry: its kind (`fifo`, `socket`, `char`, `block`,
/// with the device's number) and its permission bits, beside `digest`.
pub fn special(digest: String, kind: &str, mode: u32) -> String {
    use std::fmt::Write;
    let mut out = digest;
    let _ = write!(out, "{MODE}{kind}:{:04o}", mode & 0o7777);
    out
}

/// An entry's content digest and its recorded mode (`None`: none was).
pub fn split(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once(MODE) {
        Some((digest, mode)) => (digest, Some(mode)),
        None => (entry, None),
    }
}

/// An entry's content digest alone.
pub fn content(entry: &str) -> &str {
    split(entry).0
}

/// Do two entries (`None`: absent) say the same state? Same content, and
/// the same mode when both recorded one.
pub fn same(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => match (split(a), split(b)) {
            ((x, Some(m)), (y, Some(n))) => x == y && m == n,
            ((x, _), (y, _)) => x == y,
        },
        _ => false,
    }
}

/// The modes before and after, when both entries recorded one and they
/// differ: what a person is told beside a file's path.
pub fn moved<'a>(before: Option<&'a str>, after: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    match (split(before?).1?, split(after?).1?) {
        (m, n) if m != n => Some((m, n)),
        _ => None,
    }
}

/// An entry as a person reads it: the digest's first characters (`short`),
/// and its mode when recorded.
pub fn shown<'a>(entry: &'a str, short: impl Fn(&'a str) -> &'a str) -> Cow<'a, str> {
    match split(entry) {
        (digest, Some(mode)) => Cow::Owned(format!("{} mode {mode}", short(digest))),
        (digest, None) => Cow::Borrowed(short(digest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link and a file whose bytes are the link's recorded text share a
    /// digest; their marks tell them apart. So do two kinds of special file.
    #[test]
    fn a_link_and_special_files_are_told_apart_by_their_marks() {
        let text = "d1".to_string();
        assert!(!same(Some(&link(text.clone())), Some(&with_mode(text.clone(), 0o644))));
        assert!(same(Some(&link(text.clone())), Some(&link(text.clone()))));
        let (fifo, socket) = (special(text.clone(), "fifo", 0o644), special(text.clone(), "socket", 0o644));
        assert_eq!(fifo, "d1;mode=fifo:0644");
        assert!(!same(Some(&fifo), Some(&socket)));
        assert!(!same(Some(&fifo), Some(&special(text.clone(), "fifo", 0o600))));
        // An older entry (no mark) still compares on content alone.
        assert!(same(Some("d1"), Some(&link(text))));
    }

    #[test]
    fn an_entry_keeps_its_digest_and_its_permission_bits() {
        let e = with_mode("ab12".into(), 0o100755);
        assert_eq!(e, "ab12;mode=0755");
        assert_eq!(split(&e), ("ab12", Some("0755")));
        assert_eq!(with_mode("ab12".into(), 0o104000), "ab12;mode=4000", "setuid kept, file type dropped");
        assert_eq!(content(&e), "ab12");
        assert_eq!(content("ab12"), "ab12");
        assert_eq!(shown(&e, |d| &d[..2]), "ab mode 0755");
        assert_eq!(shown("ab12", |d| &d[..2]), "ab");
        assert_eq!(moved(Some("a;mode=0644"), Some("b;mode=0755")), Some(("0644", "0755")));
        assert_eq!(moved(Some("a;mode=0644"), Some("b;mode=0644")), None);
        assert_eq!(moved(Some("a"), Some("a;mode=0755")), None, "no mode before: none to compare");
        assert_eq!(moved(None, Some("a;mode=0755")), None);
    }

    /// A mode change is a change; an entry stored without a mode (an older
    /// engine's baseline) compares on content alone, either side.
    #[test]
    fn a_mode_change_is_a_change_and_an_old_entry_compares_on_content() {
        let (rw, rx, none) = (with_mode("c1".into(), 0o644), with_mode("c1".into(), 0o755), with_mode("c1".into(), 0));
        assert!(same(Some(&rw), Some(&rw)));
        assert!(!same(Some(&rw), Some(&rx)));
        assert!(!same(Some(&rw), Some(&none)));
        assert!(same(Some("c1"), Some(&rx)), "an old baseline: content only, never a false change");
        assert!(same(Some(&rx), Some("c1")));
        assert!(!same(Some("c1"), Some(&with_mode("c2".into(), 0o644))), "content still compared");
        assert!(!same(Some("c1"), Some("c2")));
        assert!(!same(Some("c1"), None) && !same(None, Some(&rw)));
        assert!(same(None, None));
    }

    /// The digest of a workspace stored by an engine that recorded no mode
    /// (an intent's, judged after an upgrade) is the content digest of the
    /// same files looked at now with modes.
    #[test]
    fn an_old_workspace_digest_is_the_content_digest_of_the_new_look() {
        use std::collections::BTreeMap;
        let files = |with: bool| -> BTreeMap<String, Option<String>> {
            let entry = |d: &str| if with { with_mode(d.into(), 0o644) } else { d.to_string() };
            [("a".to_string(), Some(entry("c1"))), ("b".to_string(), None)].into_iter().collect()
        };
        let (old, new) = (files(false), files(true));
        let stored = super::super::entries_digest(old.iter());
        assert_ne!(super::super::entries_digest(new.iter()), stored, "the modes are in a new look's digest");
        assert_eq!(super::super::content_digest(new.iter()), stored);
        assert_eq!(super::super::content_digest(old.iter()), stored);
    }
}
