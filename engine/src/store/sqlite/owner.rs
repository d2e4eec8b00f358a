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
//! A store its owner shared with a group (`engine run --store-group`) is
//! the one recorded change: the mark then records the group and mode 0660
//! (`Owner::shared`), and the store's files are that group's, 0660, owned
//! by any member (only members may make files in its folder); the folder
//! is the store owner's, that group's, 2770; the group file beside the
//! store (`<store>.group`) is the owner's, that group's, 0640, and names
//! the group the mark records.
//!
//! The judgement (`judge`) is a pure function of what was seen.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::access::{FILE_MODE, GROUP_FILE_MODE, GROUP_FOLDER_MODE, GROUP_RECORD_MODE};

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

    /// The record of a store `uid` shared with group `gid`.
    pub fn shared_with(uid: u32, gid: u32) -> Owner {
        Owner { uid, gid, mode: GROUP_FILE_MODE }
    }

    /// The group this record shares the store with: its files' mode is
    /// the group's (0660), which the engine gives only a shared store.
    pub fn shared(&self) -> Option<u32> {
        (self.mode == GROUP_FILE_MODE).then_some(self.gid)
    }
}

/// Which of the store's paths a seen one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The store file, the mark, SQLite's side files.
    File,
    /// The group file (`<store>.group`).
    GroupFile,
    /// The store's folder.
    Folder,
}

/// One of the store's files (or its folder) as seen now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: PathBuf,
    pub now: Owner,
    pub part: Part,
}

/// The group file as found: its path, and the gid of the group it names
/// (`None`: there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFile {
    pub path: PathBuf,
    pub names: Option<u32>,
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
    /// A shared store's file (any member's) in another group.
    Group {
        was: u32,
        now: u32,
    },
    Mode {
        was: u32,
        now: u32,
    },
    /// The group file disagrees with the mark: the group the mark records
    /// (`None`: not shared) and the one the file names (`None`: no file).
    Sharing {
        was: Option<u32>,
        now: Option<u32>,
    },
}

impl Change {
    /// For `--json`'s `details`: the file, what changed, from what to what.
    pub fn details(&self, path: &Path) -> serde_json::Value {
        let file = path.display().to_string();
        match self {
            Change::Owner { was, now } => serde_json::json!({"file": file, "change": "owner",
                "was": {"uid": was.0, "gid": was.1}, "now": {"uid": now.0, "gid": now.1}}),
            Change::Group { was, now } => serde_json::json!({"file": file, "change": "group",
                "was": {"gid": was}, "now": {"gid": now}}),
            Change::Mode { was, now } => serde_json::json!({"file": file, "change": "mode",
                "was": format!("{was:04o}"), "now": format!("{now:04o}")}),
            Change::Sharing { was, now } => serde_json::json!({"file": file, "change": "sharing",
                "was": {"gid": was}, "now": {"gid": now}}),
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
            Change::Group { was, now } => write!(f, "its group changed from gid {was} to gid {now}"),
            Change::Mode { was, now } => write!(f, "its mode changed from {was:04o} to {now:04o}"),
            Change::Sharing { was: Some(was), now: None } => {
                write!(f, "the mark records the store shared with gid {was}, and this group file naming it is gone")
            }
            Change::Sharing { was: Some(was), now: Some(now) } => {
                write!(f, "it names gid {now}, and the mark records the store shared with gid {was}")
            }
            Change::Sharing { was: None, now: Some(now) } => write!(
                f,
                "it shares the store with gid {now}, which the mark does not record (only `engine run \
                 --store-group` shares a store)"
            ),
            Change::Sharing { was: None, now: None } => write!(
                f,
                "it is a group file the mark does not record (only `engine run --store-group` shares a store)"
            ),
        }
    }
}

/// Judge the files as `seen` (the store file first) against the owner the
/// mark `recorded` (or, for a mark from before the record, the user `me`,
/// any group, and [`FILE_MODE`]) and the `group` file as found.
pub fn judge(seen: &[Seen], recorded: Option<Owner>, group: &GroupFile, me: u32) -> Option<Wrong> {
    let shared = recorded.and_then(|r| r.shared());
    // A group file beside a store the mark records as its owner's alone,
    // even one naming no group this system knows, is a change too.
    let unrecorded = shared.is_none() && seen.iter().any(|s| s.part == Part::GroupFile);
    if shared != group.names || unrecorded {
        let change = Change::Sharing { was: shared, now: group.names };
        return Some(Wrong::Changed { path: group.path.clone(), change });
    }
    match (recorded, shared) {
        (Some(r), Some(gid)) => judge_shared(seen, r.uid, gid),
        _ => judge_owned(seen, recorded, me),
    }
}

/// A store of its owner alone.
fn judge_owned(seen: &[Seen], recorded: Option<Owner>, me: u32) -> Option<Wrong> {
    // Without a record, the store file's own uid stands for the store's:
    // files of one other user are someone else's store; a mix is a change.
    let store_uid = seen.iter().find(|s| s.part == Part::File).map_or(me, |s| s.now.uid);
    let mut expected = recorded.unwrap_or(Owner { uid: store_uid, gid: 0, mode: FILE_MODE });
    // The folder and every file given, together, to one other owner: the
    // store was handed over whole (`chown -R`), not one file of it changed.
    if let Some(whole) = given_whole(seen) {
        expected = Owner { mode: expected.mode, ..whole };
    }
    for s in seen {
        let folder = s.part == Part::Folder;
        // The folder's group, like its mode, is the person's choice.
        let group_changed = !folder && recorded.is_some() && s.now.gid != expected.gid;
        let owner_changed = s.now.uid != expected.uid || group_changed;
        if owner_changed {
            let was = (expected.uid, recorded.filter(|_| !folder).map(|r| r.gid));
            return Some(Wrong::Changed {
                path: s.path.clone(),
                change: Change::Owner { was, now: (s.now.uid, s.now.gid) },
            });
        }
        if !folder && s.now.mode != expected.mode {
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

/// A store its owner `owner` shared with group `gid`: every file that
/// group's and 0660, whoever of its members made it; the folder and the
/// group file the owner's, that group's, 2770 and 0640.
fn judge_shared(seen: &[Seen], owner: u32, gid: u32) -> Option<Wrong> {
    for s in seen {
        let (uid, mode) = match s.part {
            Part::File => (None, GROUP_FILE_MODE),
            Part::GroupFile => (Some(owner), GROUP_RECORD_MODE),
            Part::Folder => (Some(owner), GROUP_FOLDER_MODE),
        };
        let change = if uid.is_some_and(|u| u != s.now.uid) {
            Change::Owner { was: (owner, Some(gid)), now: (s.now.uid, s.now.gid) }
        } else if s.now.gid != gid {
            Change::Group { was: gid, now: s.now.gid }
        } else if s.now.mode != mode {
            Change::Mode { was: mode, now: s.now.mode }
        } else {
            continue;
        };
        return Some(Wrong::Changed { path: s.path.clone(), change });
    }
    None
}

/// The one owner of the folder and every file, when they have one (and
/// the files one group).
fn given_whole(seen: &[Seen]) -> Option<Owner> {
    let first = seen.iter().find(|s| s.part == Part::File)?.now;
    let one_uid = seen.iter().all(|s| s.now.uid == first.uid);
    let one_gid = seen.iter().filter(|s| s.part == Part::File).all(|s| s.now.gid == first.gid);
    (one_uid && one_gid).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn file(name: &str, uid: u32, gid: u32, mode: u32) -> Seen {
        Seen { path: PathBuf::from(name), now: Owner { uid, gid, mode }, part: Part::File }
    }

    fn folder(uid: u32, mode: u32) -> Seen {
        Seen { path: PathBuf::from("dir"), now: Owner { uid, gid: 1000, mode }, part: Part::Folder }
    }

    fn unshared() -> GroupFile {
        GroupFile { path: PathBuf::from("engine.db.group"), names: None }
    }

    fn made() -> Owner {
        Owner { uid: ME, gid: 100, mode: 0o600 }
    }

    fn store(mark: Seen) -> Vec<Seen> {
        vec![file("engine.db", ME, 100, 0o600), mark, file("engine.db-wal", ME, 100, 0o600), folder(ME, 0o755)]
    }

    #[test]
    fn the_files_as_the_engine_made_them_pass() {
        assert_eq!(judge(&store(file("mark", ME, 100, 0o600)), Some(made()), &unshared(), ME), None);
        // A mark from before the record: any group, the user's uid, 0600.
        assert_eq!(judge(&store(file("mark", ME, 7, 0o600)), None, &unshared(), ME), None);
    }

    #[test]
    fn a_chown_or_chmod_of_any_file_is_named_as_a_change() {
        let chowned = judge(&store(file("mark", 65534, 65534, 0o600)), Some(made()), &unshared(), ME);
        assert_eq!(
            chowned,
            Some(Wrong::Changed {
                path: "mark".into(),
                change: Change::Owner { was: (ME, Some(100)), now: (65534, 65534) }
            })
        );
        let chgrp = judge(&store(file("mark", ME, 5, 0o600)), Some(made()), &unshared(), ME);
        assert!(matches!(chgrp, Some(Wrong::Changed { change: Change::Owner { .. }, .. })), "{chgrp:?}");
        for mode in [0o644, 0o400, 0o000, 0o4600] {
            let chmod = judge(&store(file("mark", ME, 100, mode)), Some(made()), &unshared(), ME);
            assert_eq!(
                chmod,
                Some(Wrong::Changed { path: "mark".into(), change: Change::Mode { was: 0o600, now: mode } }),
                "{mode:o}"
            );
        }
        // Without a record too: a mix of owners, or a mode not 0600.
        assert!(matches!(judge(&store(file("mark", 0, 0, 0o600)), None, &unshared(), ME), Some(Wrong::Changed { .. })));
        assert!(matches!(
            judge(&store(file("mark", ME, 0, 0o644)), None, &unshared(), ME),
            Some(Wrong::Changed { .. })
        ));
        // The folder's owner counts; its mode is the person's choice.
        let mut s = store(file("mark", ME, 100, 0o600));
        s[3] = folder(0, 0o755);
        assert!(matches!(judge(&s, Some(made()), &unshared(), ME), Some(Wrong::Changed { .. })));
        let mut s = store(file("mark", ME, 100, 0o600));
        s[3] = folder(ME, 0o777);
        assert_eq!(judge(&s, Some(made()), &unshared(), ME), None);
    }

    #[test]
    fn another_users_whole_store_is_not_tampering() {
        let theirs = vec![file("engine.db", 7, 7, 0o600), file("mark", 7, 7, 0o600), folder(7, 0o700)];
        let made = Owner { uid: 7, gid: 7, mode: 0o600 };
        assert_eq!(
            judge(&theirs, Some(made), &unshared(), ME),
            Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 })
        );
        assert_eq!(judge(&theirs, None, &unshared(), ME), Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 }));
        // Made by this user, then handed over whole (`chown -R`): theirs now.
        assert_eq!(
            judge(&theirs, Some(super::Owner { uid: ME, gid: 100, mode: 0o600 }), &unshared(), ME),
            Some(Wrong::NotYours { path: "engine.db".into(), uid: 7 })
        );
        // Handed over whole to this user: the store is theirs to use.
        let mine = vec![file("engine.db", ME, 5, 0o600), file("mark", ME, 5, 0o600), folder(ME, 0o700)];
        assert_eq!(judge(&mine, Some(Owner { uid: 7, gid: 7, mode: 0o600 }), &unshared(), ME), None);
    }

    const G: u32 = 500;
    const BOB: u32 = 1001;

    fn named(gid: Option<u32>) -> GroupFile {
        GroupFile { path: PathBuf::from("engine.db.group"), names: gid }
    }

    /// A store ME shared with group G: files of ME and of BOB, a member.
    fn shared_store() -> Vec<Seen> {
        vec![
            file("engine.db", ME, G, 0o660),
            file("mark", BOB, G, 0o660),
            file("engine.db-wal", BOB, G, 0o660),
            Seen { path: "engine.db.group".into(), now: Owner { uid: ME, gid: G, mode: 0o640 }, part: Part::GroupFile },
            Seen { path: "dir".into(), now: Owner { uid: ME, gid: G, mode: 0o2770 }, part: Part::Folder },
        ]
    }

    fn changed(seen: &[Seen], recorded: Option<Owner>, group: Option<u32>) -> Option<(String, Change)> {
        match judge(seen, recorded, &named(group), BOB) {
            Some(Wrong::Changed { path, change }) => Some((path.display().to_string(), change)),
            None => None,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_shared_store_passes_whichever_member_made_its_files() {
        let record = Some(Owner::shared_with(ME, G));
        assert_eq!(record.and_then(|r| r.shared()), Some(G));
        assert_eq!(made().shared(), None);
        // Judged for BOB, a member who owns neither the store nor its folder.
        assert_eq!(judge(&shared_store(), record, &named(Some(G)), BOB), None);
        assert_eq!(judge(&shared_store(), record, &named(Some(G)), ME), None);
    }

    #[test]
    fn a_shared_stores_chmod_or_chgrp_is_named_never_let_through() {
        let record = Some(Owner::shared_with(ME, G));
        let with = |i: usize, f: &dyn Fn(&mut Owner)| {
            let mut s = shared_store();
            f(&mut s[i].now);
            changed(&s, record, Some(G))
        };
        // A file made private again, or opened to others, or given another group.
        assert_eq!(with(1, &|o| o.mode = 0o600), Some(("mark".into(), Change::Mode { was: 0o660, now: 0o600 })));
        assert_eq!(with(0, &|o| o.mode = 0o666), Some(("engine.db".into(), Change::Mode { was: 0o660, now: 0o666 })));
        assert_eq!(with(2, &|o| o.gid = 7), Some(("engine.db-wal".into(), Change::Group { was: G, now: 7 })));
        // The group file: the owner's, the group's, 0640 (a member may not write it).
        assert_eq!(
            with(3, &|o| o.uid = BOB),
            Some(("engine.db.group".into(), Change::Owner { was: (ME, Some(G)), now: (BOB, G) }))
        );
        assert_eq!(
            with(3, &|o| o.mode = 0o660),
            Some(("engine.db.group".into(), Change::Mode { was: 0o640, now: 0o660 }))
        );
        // The folder: the owner's, the group's, 2770.
        assert_eq!(
            with(4, &|o| o.uid = BOB),
            Some(("dir".into(), Change::Owner { was: (ME, Some(G)), now: (BOB, G) }))
        );
        assert_eq!(with(4, &|o| o.mode = 0o770), Some(("dir".into(), Change::Mode { was: 0o2770, now: 0o770 })));
        assert_eq!(with(4, &|o| o.gid = 7), Some(("dir".into(), Change::Group { was: G, now: 7 })));
    }

    #[test]
    fn a_group_file_the_mark_does_not_record_is_a_change() {
        let sharing = |was, now| Some(("engine.db.group".to_string(), Change::Sharing { was, now }));
        // Planted beside a store of its owner alone.
        let mine = store(file("mark", ME, 100, 0o600));
        assert_eq!(changed(&mine, Some(made()), Some(G)), sharing(None, Some(G)));
        assert_eq!(changed(&mine, None, Some(G)), sharing(None, Some(G)));
        // One naming no group the system knows (read as naming none).
        let mut planted = mine.clone();
        planted.push(Seen {
            path: "engine.db.group".into(),
            now: Owner { uid: ME, gid: 100, mode: 0o640 },
            part: Part::GroupFile,
        });
        assert_eq!(changed(&planted, Some(made()), None), sharing(None, None));
        // Removed, or naming another group, beside a shared store.
        let record = Some(Owner::shared_with(ME, G));
        assert_eq!(changed(&shared_store(), record, None), sharing(Some(G), None));
        assert_eq!(changed(&shared_store(), record, Some(7)), sharing(Some(G), Some(7)));
    }
}
