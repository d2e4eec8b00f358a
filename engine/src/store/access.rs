//! Who may read a store's files: its owner, and no one else. A store holds
//! every request the engine sent and every answer it got (secrets of a
//! provider's output included, before redaction reaches a report), so the
//! stores' root, each store's folder and each of its files are the owner's
//! alone: folders 0700, files 0600. A folder or file the engine keeps that
//! was opened up since is closed again; one owned by another user, or a
//! symlink, is refused (nothing is read or written through it).
//!
//! The one place this rule lives: every check of a store's folder or file
//! mode calls [`owner_only`], so a store shared by a group of users changes
//! the rule here, once.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// The mode of a store's folders (the stores' root included).
pub const FOLDER_MODE: u32 = 0o700;
/// The mode of a store's files.
pub const FILE_MODE: u32 = 0o600;

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

/// The user this engine runs as.
pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `path` (a store's `kind` of path, which exists) is ours and readable
/// by us alone afterwards: a symlink, the wrong kind, or another user's is
/// refused naming it; group or other bits are taken away.
pub fn owner_only(path: &Path, kind: Kind) -> Result<()> {
    let place = || path.display().to_string();
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::usage(format!("cannot inspect the store's {}: {e}", kind.word())).at(place()))?;
    if meta.file_type().is_symlink() {
        return Err(Error::usage(format!(
            "the store's {} is a symlink; refused (nothing is read or written through it)",
            kind.word()
        ))
        .at(place()));
    }
    let right_kind = match kind {
        Kind::Folder => meta.is_dir(),
        Kind::File => meta.is_file(),
    };
    if !right_kind {
        return Err(
            Error::usage(format!("the store's {} is not a regular {}; refused", kind.word(), kind.word())).at(place())
        );
    }
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
