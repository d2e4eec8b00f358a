//! Sharing a store with a group (`engine run --store PATH --store-group
//! NAME`, its owner's explicit choice), under the store's lease: the one
//! change of the store's files' owners and modes the engine records.
//!
//! The mark records the group first (`Owner::shared_with`), then the group
//! file is written beside the store, then every file of the store is given
//! to the group (0660) and the folder too (setgid, 2770), so members'
//! engines make their files that group's. From then on every open judges
//! the files against that record (`owner.rs`) and repairs nothing: a later
//! `chmod` or `chgrp` is `STORE_TAMPERED`. A sharing stopped midway (the
//! machine stopped) leaves files the record does not match, refused the
//! same way, naming the first; docs/store.md says how to finish it.

use super::files::{io_error, sync_dir, StoreFiles};
use super::mark::{Mark, MarkFile};
use super::owner::Owner;
use crate::error::Result;
use crate::os::Group;
use crate::store::access::{self, current_uid, GROUP_FILE_MODE, GROUP_FOLDER_MODE};

/// Share the store whose `files` and `mark` this process holds under its
/// lease with `group`; nothing to do when the mark records it already (the
/// files were judged as shared when the store was opened).
pub(super) fn share(files: &StoreFiles, mark: &mut MarkFile, group: &Group) -> Result<()> {
    let record = Owner::shared_with(current_uid(), group.gid);
    if mark.last().owner == Some(record) {
        return Ok(());
    }
    mark.record(Mark { owner: Some(record), ..mark.last().clone() }, true)?;
    access::write_record(&files.group_file(), group)?;
    for path in files.existing() {
        access::give_group(&path, group.gid, GROUP_FILE_MODE)
            .map_err(|e| io_error(e, &path, "cannot share a file of the store with the group"))?;
    }
    access::give_group(&files.dir, group.gid, GROUP_FOLDER_MODE)
        .map_err(|e| io_error(e, &files.dir, "cannot share the store's folder with the group"))?;
    sync_dir(&files.dir)
}
