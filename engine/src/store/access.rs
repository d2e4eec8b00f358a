//! Who may read a store's files: its owner, and no one else. A store holds
//! every request the engine sent and every answer it got (secrets of a
//! provider's output included, before redaction reaches a report), so the
//! stores' root, each store's folder and each of its files are the owner's
//! alone: folders 0700, files 0600. A folder or file the engine keeps that
//! was opened up since is closed again; one owned by another user, or a
//! symlink, is refused (nothing is read or written through it).
//!
//! The one place this rule lives: every check of a store's folder or file
//! mode calls [`owner_only`] or [`check`].
//!
//! The one exception is explicit: a store its owner shares with a named
//! group (`engine run PLAN --store PATH --store-group NAME`, recorded in the
//! file `<store>.group` beside it and in the store's mark). Then the folder
//! is that group's, setgid, 2770, and every file 0660 of that group, so each
//! member's engine can read and write it, and no one outside the group can.
//! Such a store lives at a path a person chose: the state folder of the
//! default stores stays its owner's alone. The store's files are set so
//! once, under the store's lease (`sqlite/share.rs`); from then on every
//! open judges them against the mark (`sqlite/owner.rs`) and repairs nothing.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::os::{self, Group};

/// The mode of a store's folders (the stores' root included).
pub const FOLDER_MODE: u32 = 0o700;
/// The mode of a store's files.
pub const FILE_MODE: u32 = 0o600;

/// The mode of a group store's folders: the group's, setgid (so every
/// file made in it is the group's too).
pub const GROUP_FOLDER_MODE: u32 = 0o2770;
/// The mode of a group store's files.
pub const GROUP_FILE_MODE: u32 = 0o660;
/// The folders `share` makes above a group store's: passed through, not listed.
const PASS_THROUGH_MODE: u32 = 0o711;
/// The mode of the file naming a store's group: its owner writes it.
pub const GROUP_RECORD_MODE: u32 = 0o640;

/// Beside a store: the name of the group it is shared with.
pub const GROUP_SUFFIX: &str = ".group";

/// What a path of a store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Folder,
    File,
}

impl Kind {
    fn mode(self) -> u32 {
        match self {
            Kind::Folder => FOLDER_MODE,
            Kind::File => FILE_MODE,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::Folder => "folder",
            Kind::File => "file",
        }
    }
}

/// Do these bits let anyone but the owner in?
pub fn opened_up(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// What an engine can confine its providers with, part by part. A store
/// shared with a group records its owner's (`sqlite/share.rs`, under the
/// lease), and every other person's run on it is held to that: the same
/// confinement for every person, or refused, never weaker in silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confinement {
    /// Landlock's file rules.
    pub landlock: bool,
    /// A cgroup per process tree (nothing a provider starts outlives it).
    pub cgroup: bool,
    /// The stores hidden (the run's mount namespace).
    pub stores_hidden: bool,
    /// No network at all where none is declared (the run's network
    /// namespace; without it UDP is not restricted).
    pub network_namespace: bool,
}

impl Confinement {
    /// Every part: what a store shared before its owner's engine recorded
    /// one is held to.
    pub const FULL: Confinement =
        Confinement { landlock: true, cgroup: true, stores_hidden: true, network_namespace: true };

    /// The parts `required` has and `self` lacks, by name.
    pub fn missing(&self, required: &Confinement) -> Vec<&'static str> {
        [
            (self.landlock, required.landlock, "landlock"),
            (self.cgroup, required.cgroup, "cgroup"),
            (self.stores_hidden, required.stores_hidden, "stores_hidden"),
            (self.network_namespace, required.network_namespace, "network_namespace"),
        ]
        .into_iter()
        .filter(|(ours, theirs, _)| *theirs && !*ours)
        .map(|(_, _, name)| name)
        .collect()
    }
}

/// The user this engine runs as.
pub fn current_uid() -> u32 {
    os::uid()
}

/// Who a store is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sharing {
    /// Its owner alone (the default): folders 0700, files 0600.
    Owner,
    /// Its owner and the members of a group, by the owner's choice.
    Group(Group),
}

impl Sharing {
    /// The sharing of the store file `db`: its `<db>.group` file, if there
    /// is one. That file must be a regular file naming a group the system
    /// knows, and this user must be in that group (or root) to use the
    /// store; its owner and mode, and the group it names, must be the ones
    /// the mark records (judged at every open: `sqlite/owner.rs`).
    pub fn of(db: &Path) -> Result<Sharing> {
        let record = group_record(db);
        let place = || record.display().to_string();
        let meta = match std::fs::symlink_metadata(&record) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Sharing::Owner),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let dir = folder_of(db).unwrap_or(Path::new("/"));
                return Err(Error::usage(
                    "the store's folder is closed to you: a store is its owner's alone, unless its owner shared it with a group you are in (engine run --store-group, docs/store.md)",
                )
                .at(dir.display().to_string()));
            }
            Err(e) => return Err(Error::usage(format!("cannot inspect the store's group file: {e}")).at(place())),
        };
        // Its owner and mode are judged with the store's other files,
        // against the mark (`sqlite/owner.rs`), before the store is read.
        if !meta.file_type().is_file() {
            return Err(Error::usage("the store's group file is not a regular file; refused").at(place()));
        }
        let text = std::fs::read_to_string(&record)
            .map_err(|e| Error::usage(format!("cannot read the store's group file: {e}")).at(place()))?;
        let name = text.trim();
        let group = os::group_named(name).ok_or_else(|| {
            Error::usage(format!("the store is shared with group `{name}`, which this system does not know"))
                .at(place())
        })?;
        if current_uid() != 0 && !os::groups().contains(&group.gid) {
            let user = os::user_name(current_uid()).unwrap_or_else(|| format!("uid {}", current_uid()));
            return Err(Error::usage(format!(
                "the store is shared with group `{}` and {user} is not in it: ask its owner to add you (usermod -aG {} {user}), then log in again",
                group.name, group.name
            ))
            .at(place()));
        }
        Ok(Sharing::Group(group))
    }
}

/// The file naming the group a store is shared with: `<db>.group`.
pub fn group_record(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(GROUP_SUFFIX);
    PathBuf::from(s)
}

fn folder_of(db: &Path) -> Option<&Path> {
    db.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
}

/// The uid that owns the store at `db`: its folder's owner (who chose
/// where it lives, and who alone may share it).
pub fn store_owner(db: &Path) -> Result<u32> {
    let dir = folder_of(db).unwrap_or(Path::new("/"));
    std::fs::symlink_metadata(dir)
        .map(|m| m.uid())
        .map_err(|e| Error::usage(format!("cannot inspect the store's folder: {e}")).at(dir.display().to_string()))
}

/// The group `name` the store at `db` (an explicit path) may be shared
/// with by this user, its owner: a group the system knows and this user is
/// in, the store not shared with another. The folder is made if missing
/// (0700); nothing else is written here: the sharing itself happens under
/// the store's lease (`sqlite/share.rs`). A folder someone else owns is
/// refused.
pub fn ready_to_share(db: &Path, name: &str) -> Result<Group> {
    let flag = || format!("--store-group {name}");
    let group = os::group_named(name)
        .ok_or_else(|| Error::usage(format!("no group `{name}` on this system (groupadd {name})")).at(flag()))?;
    if current_uid() != 0 && !os::groups().contains(&group.gid) {
        return Err(Error::usage(format!(
            "you are not in group `{name}`: a store can be shared only with a group of its owner"
        ))
        .at(flag()));
    }
    let dir = folder_of(db).unwrap_or(Path::new("/")).to_path_buf();
    if std::fs::symlink_metadata(&dir).is_err() {
        // Missing folders above it: the group's members must pass through
        // them (0711: through, not list); the store's own folder is closed
        // until the sharing opens it to the group.
        let made = |d: &Path, mode: u32| std::fs::DirBuilder::new().recursive(true).mode(mode).create(d);
        dir.parent().map_or(Ok(()), |p| made(p, PASS_THROUGH_MODE)).and_then(|_| made(&dir, FOLDER_MODE)).map_err(
            |e| Error::usage(format!("cannot create the store's folder: {e}")).at(dir.display().to_string()),
        )?;
    }
    if store_owner(db)? != current_uid() {
        return Err(Error::usage("only the store folder's owner may share the store with a group")
            .at(dir.display().to_string()));
    }
    match Sharing::of(db)? {
        Sharing::Group(g) if g.gid != group.gid => Err(Error::usage(format!(
            "the store is shared with group `{}` already; a store is shared with one group",
            g.name
        ))
        .at(flag())),
        _ => Ok(group),
    }
}

/// `<db>.group`, written whole under a temporary name and renamed into
/// place: the group's name, readable by the group, written by its owner.
pub fn write_record(record: &Path, group: &Group) -> Result<()> {
    let failed = |e: std::io::Error| {
        Error::usage(format!("cannot record the store's group: {e}")).at(record.display().to_string())
    };
    let mut tmp = record.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format!("{}\n", group.name).as_bytes())?;
        chown_group(&tmp, group.gid)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(GROUP_RECORD_MODE))?;
        f.sync_all()?;
        std::fs::rename(&tmp, record)
    })();
    let _ = std::fs::remove_file(&tmp);
    written.map_err(failed)
}

/// `path`'s group set to `gid` (its owner unchanged), never through a symlink.
fn chown_group(path: &Path, gid: u32) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: a NUL-terminated path that outlives the call; uid -1 keeps the owner.
    let rc = unsafe { libc::lchown(c.as_ptr(), u32::MAX, gid) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `path` (one of a shared store's files, or its folder) given group
/// `gid` and `mode`, never through a symlink.
pub fn give_group(path: &Path, gid: u32, mode: u32) -> std::io::Result<()> {
    chown_group(path, gid)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A symlink, or not the kind expected: refused (nothing is read or
/// written through it).
fn refuse_odd(meta: &std::fs::Metadata, kind: Kind) -> Result<()> {
    if meta.file_type().is_symlink() {
        return Err(Error::usage(format!(
            "the store's {} is a symlink; refused (nothing is read or written through it)",
            kind.word()
        )));
    }
    let right_kind = match kind {
        Kind::Folder => meta.is_dir(),
        Kind::File => meta.is_file(),
    };
    if !right_kind {
        return Err(Error::usage(format!("the store's {} is not a regular {}; refused", kind.word(), kind.word())));
    }
    Ok(())
}

/// `path` (a store's `kind` of path, which exists) is ours and readable
/// by us alone afterwards: a symlink, the wrong kind, or another user's is
/// refused naming it; group or other bits are taken away.
pub fn owner_only(path: &Path, kind: Kind) -> Result<()> {
    let place = || path.display().to_string();
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::usage(format!("cannot inspect the store's {}: {e}", kind.word())).at(place()))?;
    refuse_odd(&meta, kind).map_err(|e| e.at(place()))?;
    if meta.uid() != current_uid() {
        return Err(Error::usage(format!(
            "the store's {} is owned by uid {}, not by you; refused",
            kind.word(),
            meta.uid()
        ))
        .at(place()));
    }
    if opened_up(meta.mode()) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(kind.mode())).map_err(|e| {
            Error::usage(format!("cannot make the store's {} private ({:o}): {e}", kind.word(), kind.mode()))
                .at(place())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_confinement_lacks_only_what_the_required_one_has() {
        let none = Confinement { landlock: true, cgroup: false, stores_hidden: false, network_namespace: false };
        assert_eq!(none.missing(&Confinement::FULL), vec!["cgroup", "stores_hidden", "network_namespace"]);
        assert!(none.missing(&none).is_empty(), "the same as the owner's: nothing missing");
        assert!(Confinement::FULL.missing(&none).is_empty());
    }

    #[test]
    fn an_opened_up_folder_or_file_is_closed_and_a_symlink_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("f");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        owner_only(&folder, Kind::Folder).unwrap();
        assert_eq!(mode(&folder), 0o700);
        let file = folder.join("x");
        std::fs::write(&file, b"").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        owner_only(&file, Kind::File).unwrap();
        assert_eq!(mode(&file), 0o600);
        // Already private: left as it is (0500 stays 0500).
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        owner_only(&file, Kind::File).unwrap();
        assert_eq!(mode(&file), 0o400);

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&folder, &link).unwrap();
        let e = owner_only(&link, Kind::Folder).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert_eq!(mode(&folder), 0o700);
        let e = owner_only(&file, Kind::Folder).unwrap_err();
        assert!(e.to_string().contains("not a regular folder"), "{e}");
        assert!(opened_up(0o750) && opened_up(0o701) && !opened_up(0o700));
    }
}
