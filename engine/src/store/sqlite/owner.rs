//! Who owns the store's files, and with which permission bits. The engine
//! makes them private (0600, the folder 0700) and owned by the user it runs
//! as, and records that owner in the mark when it makes the store. Every
//! open compares the files as they are now with that record, before
//! anything reads them: a file whose owner (uid or gid) or mode changed was
//! changed by something other than the engine — a provider's `chown` or
//! `chmod`, which the sandbox's path rules do not cover — and is refused as
//! `STORE_TAMPERED`, naming the file and the change, never repaired in
//! silence. A store whose files are all, consistently, another user's is
//! not tampering but someone else's store (`USAGE_ERROR`, as before).
//!
//! The judgement (`judge`) is a pure function of what was seen.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::access::FILE_MODE;

/// The owner and mode the engine made the store's files with (the mark
/// records it; a mark from before the record has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl Owner {
    /// The owner of the file at `path`, as it is.
    pub fn of(path: &Path) -> std::io::Result<Owner> {
        let m = std::fs::symlink_metadata(path)?;
        Ok(Owner { uid: m.uid(), gid: m.gid(), mode: m.mode() & 0o7777 })
    }
}

/// One of the store's files (or its folder) as seen now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: PathBuf,
    pub now: Owner,
    /// The folder: its owner (uid) is judged; its group and mode are the
    /// person's choice.
    pub folder: bool,
}

/// What is wrong with the files' owners and modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrong {
    /// Every file is another user's: someone else's store.
    NotYours { path: PathBuf, uid: u32 },
    /// A file's owner or mode is not the one the engine gave it.
    Changed { path: PathBuf, change: Change },
}

/// A change the engine did not make, with the value it expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `was`'s gid is `None` when the mark recorded no owner (any group).
    Owner {
        was: (u32, Option<u32>),
        now: (u32, u32),
    },
    Mode {
        was: u32,
        now: u32,
    },
}

impl Change {
    /// For `--json`'s `details`: the file, what changed, from what to what.
    pub fn details(&self, path: &Path) -> serde_json::Value {
        let file = path.display().to_string();
        match self {
            Change::Owner { was, now } => serde_json::json!({"file": file, "change": "owner",
                "was": {"uid": was.0, "gid": was.1}, "now": {"uid": now.0, "gid": now.1}}),
            Change::Mode { was, now } => serde_json::json!({"file": file, "change": "mode",
                "was": format!("{was:04o}"), "now": format!("{now:04o}")}),
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Owner { was: (uid, Some(gid)), now } => {
                write!(f, "its owner changed from uid {uid} gid {gid} to uid {} gid {}", now.0, now.1)
            }
            Change::Owner { was: (uid, None), now } => {
                write!(f, "its owner changed from uid {uid} to uid {} gid {}", now.0, now.1)
            }
            Change::Mode { was, now } => write!(f, "its mode changed from {was:04o} to {now:04o}"),
        }
    }
}

/// Judge the files as `seen` (the store file first) against the owner the
/// mark `recorded` (or, for a mark from before the record, the user `me`,
/// any group, and [`FILE_MODE`]).
pub fn judge(seen: &[Seen], recorded: Option<Owner>, me: u32) -> Option<Wrong> {
    // Without a record, the store file's own uid stands for the store's:
    // files of one other user are someone else's store; a mix is a change.
    let store_uid = seen.iter().find(|s| !s.folder).map_or(me, |s| s.now.uid);
    let mut expected = recorded.unwrap_or(Owner { uid: store_uid, gid: 0, mode: FILE_MODE });
    // The folder and every file given, together, to one other owner: the
    // store was handed over whole (`chown -R`), not one file of it changed.
    if let Some(whole) = given_whole(seen) {
        expected = Owner { mode: expected.mode, ..whole };
    }
    for s in seen {
        // The folder's group, like its mode, is the person's choice.
        let group_changed = !s.folder && recorded.is_some() && s.now.gid != expected.gid;
        let owner_changed = s.now.uid != expected.uid || group_changed;
        if owner_changed {
            let was = (expected.uid, recorded.filter(|_| !s.folder).map(|r| r.gid));
            return Some(Wrong::Changed {
                path: s.path.clone(),
                change: Change::Owner { was, now: (s.now.uid, s.now.gid) },
            });
        }
        if !s.folder && s.now.mode != expected.mode {
            return Some(Wrong::Changed {
                path: s.path.clone(),
                change: Change::Mode { was: expected.mode, now: s.now.mode },
            });
        }
    }
    match seen.first() {
        Some(s) if expected.uid != me => Some(Wrong::NotYours { path: s.path.clone(), uid: expected.uid }),
        _ => None,
    }
}

/// The one owner of the folder and every file, when they have one (and
/// the files one group).
fn given_whole(seen: &[Seen]) -> Option<Owner> {
    let first = seen.iter().find(|s| !s.folder)?.now;
    let one_uid = seen.iter().all(|s| s.now.uid == first.uid);
    let one_gid = seen.iter().filter(|s| !s.folder).all(|s| s.now.gid == first.gid);
    (one_uid && one_gid).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn file(name: &str, uid: u32, gid: u32, mode: u32) -> Seen {
        Seen { path: PathBuf::from(name), now: Owner { uid, gid, mode }, folder: false }
    }

    fn folder(uid: u32, mode: u32) -> Seen {
        Seen { path: PathBuf::from("dir"), now: Owner { uid, gid: 1000, mode }, folder: true }
    }

    fn made() -> Owner {
        Owner { uid: ME, gid: 100, mode: 0o600 }
    }

    fn store(mark: Seen) -> Vec<Seen> {
        vec![file("engine.db", ME, 100, 0o600), mark, file("engine.db-wal", ME, 100, 0o600), folder(ME, 0o755)]
    }

    #[test]
    fn the_files_as_the_engine_made_them_pass() {
        assert_eq!(judge(&store(file("mark", ME, 100, 0o600)), Some(made()), ME), None);
        // A mark from before the record: any group, the user's uid, 0600.
        assert_eq!(judge(&store(file("mark", ME, 7, 0o600)), None, ME), None);
    }

    #[test]
    fn a_chown_or_chmod_of_any_file_is_named_as_a_change() {
        let chowned = judge(&store(file("mark", 65534, 65534, 0o600)), Some(made()), ME);
        assert_eq!(
            chowned,
            Some(Wrong::Changed {
                path: "mark".into(),
                change: Change::Owner { was: (ME, Some(100)), now: (65534, 65534) }
            })
        );
        let chgrp = judge(&store(file("mark", ME, 5, 0o600)), Some(made()), ME);
        assert!(matches!(chgrp, Some(Wrong::Changed { change: Change::Owner { .. }, .. })), "{chgrp:?}");
        for mode in [0o644, 0o400, 0o000, 0o4600] {
            let chmod = judge(&store(file("mark", ME, 100, mode)), Some(made()), ME);
            assert_eq!(
                chmod,
                Some(Wrong::Changed { path: "mark".into(), change: Change::Mode { was: 0o600, now: mode } }),
                "{mode:o}"
            );
        }
        // Without a record too: a mix of owners, or a mode not 0600.
        assert!(matches!(judge(&store(file("mark", 0, 0, 0o600)), None, ME), Some(Wrong::Changed { .. })));
        assert!(matches!(judge(&store(file("mark", ME, 0, 0o644)), None, ME), Some(Wrong::Changed { .. })));
        // The folder's owner counts; its mode is the person's choice.
        let mut s = store(file("mark", ME, 100, 0o600));
        s[3] = folder(0, 0o755);
        assert!(matches!(judge(&s, Some(made()), ME), Some(Wrong::Changed { .. })));
        let mut s = store(file("mark", ME, 100, 0o600));
        s[3] = folder(ME, 0o777);
        assert_eq!(judge(&s, Some(made()), ME), None);
    }

    #[test]
    fn another_users_whole_store_is_not_tampering() {
        let theirs = vec![file("engine.db", 7, 7, 0o600), file("mark", 7, 7, 0o600), folder(7, 0o700)];
        let made = Owner { uid: 7, gid: 7, mode: 0o600 };
        assert_eq!(judge(&theirs, Some(made), ME), Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 }));
        assert_eq!(judge(&theirs, None, ME), Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 }));
        // Made by this user, then handed over whole (`chown -R`): theirs now.
        assert_eq!(
            judge(&theirs, Some(super::Owner { uid: ME, gid: 100, mode: 0o600 }), ME),
            Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 })
        );
        // Handed over whole to this user: the store is theirs to use.
        let mine = vec![file("engine.db", ME, 5, 0o600), file("mark", ME, 5, 0o600), folder(ME, 0o700)];
        assert_eq!(judge(&mine, Some(Owner { uid: 7, gid: 7, mode: 0o600 }), ME), None);
    }
}
