//! Does this store still hold everything it committed? The store's own
//! record (`store_meta`: its id and commit count) is compared with its mark
//! (`mark.rs`); a store that lost commits is refused with `STORE_CORRUPT`
//! naming what is missing, and one that is not known to be whole — its last
//! writer died holding it, or the file changed since the engine closed it —
//! is checked as `engine verify` checks it before it is trusted
//! (`open::examine`).
//!
//! The judgement itself (`judge`) is a pure function of what was read.

use rusqlite::{Connection, OptionalExtension};

use super::files::StoreFiles;
use super::mark::{Fingerprint, Mark, WalPrint};
use super::sql::qrow;
use crate::error::{Code, Error, Result};

/// What the store file itself says about its identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// `None`: no `store_meta` row (an empty file, or a store made before
    /// schema 2).
    pub store_id: Option<String>,
    pub commits: i64,
}

/// What the store may be trusted with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No mark and nothing committed yet: a new (or pre-mark) store; its
    /// first writer makes the mark.
    Unmarked,
    Marked {
        /// The mark says a writer held the store and did not close it.
        unclean: bool,
        /// The store file differs from how the last writer closed it.
        changed: bool,
    },
}

/// The store file and its WAL as an open finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Now {
    pub file: Option<Fingerprint>,
    /// Read only when the mark records a closed WAL to compare it with.
    pub wal: Option<WalPrint>,
}

impl Now {
    /// The files of `files` now, as far as `mark` needs them.
    fn of(files: &StoreFiles, mark: Option<&Mark>) -> Result<Now> {
        let recorded = mark.filter(|m| !m.open).and_then(|m| m.closed_wal.as_ref());
        let wal = match recorded {
            Some(r) => Some(WalPrint::of(&files.side("-wal"), Some(r))?),
            None => None,
        };
        Ok(Now { file: Fingerprint::of(&files.db).ok(), wal })
    }
}

/// Judge `facts` against `mark`; `Err` is the refusal, in words.
pub fn judge(mark: Option<&Mark>, facts: &Facts, now: &Now) -> Result<Verdict, String> {
    let Some(mark) = mark else {
        if facts.commits == 0 {
            return Ok(Verdict::Unmarked);
        }
        return Err(format!(
            "the store's mark file is missing: the store holds {} commits, and without the mark the engine cannot \
             tell whether it lost any (see \"A damaged store\" in docs/store.md)",
            facts.commits
        ));
    };
    let Some(store_id) = &facts.store_id else {
        return Err(format!(
            "the store lost committed transactions: its mark records commit {} of store {}, the store file holds \
             no identity at all (empty, or its WAL was lost)",
            mark.commits, mark.store_id
        ));
    };
    if *store_id != mark.store_id {
        return Err(format!(
            "this is not the store its mark names (the file is store {store_id}, the mark is for store {}): \
             was the store file replaced?",
            mark.store_id
        ));
    }
    if facts.commits < mark.commits {
        return Err(format!(
            "the store lost committed transactions: commit {} was recorded, the store holds {} \
             (a lost or damaged WAL, or an older copy of the store file)",
            mark.commits, facts.commits
        ));
    }
    let file_changed = mark.closed_file.as_ref().is_some_and(|f| Some(f) != now.file.as_ref());
    let wal_changed = mark.closed_wal.as_ref().is_some_and(|w| Some(w) != now.wal.as_ref());
    let changed = !mark.open && (file_changed || wal_changed);
    Ok(Verdict::Marked { unclean: mark.open, changed })
}

/// Read the store's identity; an empty file or one made before schema 2
/// has none (and no commits).
pub fn facts(conn: &Connection) -> rusqlite::Result<Facts> {
    let has_meta: bool = qrow(
        conn,
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'store_meta')",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(Facts { store_id: None, commits: 0 });
    }
    let row: Option<(String, i64)> =
        qrow(conn, "SELECT store_id, commits FROM store_meta WHERE id = 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
    Ok(match row {
        Some((id, commits)) => Facts { store_id: Some(id), commits },
        None => Facts { store_id: None, commits: 0 },
    })
}

/// Read the mark, then the store (in that order: a writer records a commit
/// in the mark only after it is committed, so a store read after its mark
/// holds at least what the mark says), and judge them.
pub fn verify(conn: &Connection, files: &StoreFiles) -> Result<(Verdict, Option<Mark>, Facts)> {
    // A store being made gets its mark before its first commit; a reader
    // that saw no mark and then commits looks once more.
    for _ in 0..2 {
        let mark = Mark::read(&files.mark).map_err(|e| place(e, files))?;
        let facts = facts(conn).map_err(|e| place(Error::from(e), files))?;
        if mark.is_none() && facts.commits > 0 {
            continue;
        }
        let now = Now::of(files, mark.as_ref()).map_err(|e| place(e, files))?;
        return judged(judge(mark.as_ref(), &facts, &now), files).map(|v| (v, mark, facts));
    }
    let facts = facts(conn).map_err(|e| place(Error::from(e), files))?;
    judged(judge(None, &facts, &Now::default()), files).map(|v| (v, None, facts))
}

fn judged(v: Result<Verdict, String>, files: &StoreFiles) -> Result<Verdict> {
    v.map_err(|why| Error::new(Code::StoreCorrupt, why).at(files.place()))
}

/// The store file is gone, but its mark says it held commits: never made
/// again (a new store would forget what was sent).
pub fn missing_store(files: &StoreFiles, mark: &Mark) -> Error {
    Error::new(
        Code::StoreCorrupt,
        format!(
            "the store file is missing, but its mark ({}) records commit {} of store {}: it is not made again, \
             since a new store would forget what was sent (see \"A damaged store\" in docs/store.md)",
            files.mark.display(),
            mark.commits,
            mark.store_id
        ),
    )
    .at(files.place())
}

fn place(e: Error, files: &StoreFiles) -> Error {
    if e.place.is_some() {
        e
    } else {
        e.at(files.place())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(size: u64) -> Fingerprint {
        Fingerprint { size, mtime_ns: 1, ctime_ns: 2, inode: 3 }
    }

    fn now(size: u64) -> Now {
        Now { file: Some(fp(size)), wal: None }
    }

    fn mark(commits: i64, open: bool, closed: Option<Fingerprint>) -> Mark {
        Mark { commits, open, closed_file: closed, ..Mark::new("s1") }
    }

    fn facts(id: &str, commits: i64) -> Facts {
        Facts { store_id: Some(id.to_string()), commits }
    }

    #[test]
    fn no_mark_is_fine_only_for_a_store_that_never_committed() {
        let none = Now::default();
        assert_eq!(judge(None, &facts("s1", 0), &none), Ok(Verdict::Unmarked));
        assert_eq!(judge(None, &Facts { store_id: None, commits: 0 }, &none), Ok(Verdict::Unmarked));
        assert!(judge(None, &facts("s1", 1), &none).unwrap_err().contains("mark file is missing"));
    }

    #[test]
    fn fewer_commits_than_the_mark_another_id_or_no_id_are_refused() {
        let m = mark(41, false, None);
        let none = Now::default();
        let lost = judge(Some(&m), &facts("s1", 12), &none).unwrap_err();
        assert!(lost.contains("commit 41 was recorded, the store holds 12"), "{lost}");
        assert!(judge(Some(&m), &facts("s2", 99), &none).unwrap_err().contains("not the store its mark"));
        let empty = Facts { store_id: None, commits: 0 };
        assert!(judge(Some(&m), &empty, &none).unwrap_err().contains("lost committed transactions"));
        assert!(judge(Some(&m), &facts("s1", 41), &none).is_ok());
        assert!(judge(Some(&m), &facts("s1", 50), &none).is_ok(), "more than the mark: later commits not yet marked");
    }

    #[test]
    fn unclean_and_changed_are_told_apart() {
        let v = |m: &Mark, size: u64| judge(Some(m), &facts("s1", 5), &now(size)).unwrap();
        assert_eq!(v(&mark(5, true, None), 1), Verdict::Marked { unclean: true, changed: false });
        let closed = mark(5, false, Some(fp(8192)));
        assert_eq!(v(&closed, 8192), Verdict::Marked { unclean: false, changed: false });
        assert_eq!(v(&closed, 4096), Verdict::Marked { unclean: false, changed: true });
        // A mark from before fingerprints (or a store never closed) is not "changed".
        assert_eq!(v(&mark(5, false, None), 1), Verdict::Marked { unclean: false, changed: false });
    }

    #[test]
    fn a_commit_added_to_the_wal_of_a_closed_store_is_a_change() {
        let empty = WalPrint { size: 0, digest: String::new() };
        let closed = Mark { closed_wal: Some(empty.clone()), ..mark(5, false, Some(fp(8192))) };
        let with_wal = |wal: WalPrint| Now { file: Some(fp(8192)), wal: Some(wal) };
        let same = judge(Some(&closed), &facts("s1", 5), &with_wal(empty)).unwrap();
        assert_eq!(same, Verdict::Marked { unclean: false, changed: false });
        let appended = WalPrint { size: 4152, digest: String::new() };
        let v = judge(Some(&closed), &facts("s1", 5), &with_wal(appended)).unwrap();
        assert_eq!(v, Verdict::Marked { unclean: false, changed: true });
        let held = WalPrint { size: 4152, digest: "a".repeat(32) };
        let closed = Mark { closed_wal: Some(held.clone()), ..closed };
        let rewritten = WalPrint { size: 4152, digest: "b".repeat(32) };
        let v = judge(Some(&closed), &facts("s1", 5), &with_wal(rewritten)).unwrap();
        assert_eq!(v, Verdict::Marked { unclean: false, changed: true }, "same size, other bytes");
        let v = judge(Some(&closed), &facts("s1", 5), &with_wal(held)).unwrap();
        assert_eq!(v, Verdict::Marked { unclean: false, changed: false });
    }
}
