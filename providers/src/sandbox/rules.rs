//! The parent's half: open every rule's path, check what was opened, and
//! build the Landlock ruleset with the `landlock` crate. Everything that
//! allocates happens here, before any fork; the child only gets a file
//! descriptor (see `confine_self` in the module root).

use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use landlock::{
    make_bitflags, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
};

use super::policy::{overlap, PolicyError, Writable};

/// The ABI whose file-system rights the policy handles. Pinned, as the
/// crate asks, so a crate update never changes what is denied. ABI 5 has
/// every file-system right up to ABI 8; ABI 9's `ResolveUnix` (connecting to
/// UNIX sockets by path) is deliberately not handled: IPC is not restricted.
const TARGET_ABI: ABI = ABI::V5;

/// Everything the ruleset handles: denied unless a rule allows it.
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_all(TARGET_ABI)
}

/// What the whole file system allows: read, list, execute.
fn read_exec() -> BitFlags<AccessFs> {
    AccessFs::from_read(TARGET_ABI)
}

/// What a writable folder allows: everything but creating device nodes (a
/// process running as root could otherwise make a block device in the
/// workspace and write the disk under the store).
fn write_folder() -> BitFlags<AccessFs> {
    handled() & !make_bitflags!(AccessFs::{MakeChar | MakeBlock})
}

/// What a writable non-folder (a device such as `/dev/null`) allows.
fn write_file() -> BitFlags<AccessFs> {
    write_folder() & AccessFs::from_file(TARGET_ABI)
}

/// Upper bound on files checked for hard links under one protected folder.
const PROTECTED_ENTRIES_MAX: usize = 4096;

/// Refuse when a file under a protected path has another name: Landlock
/// checks the path a file is opened by, so a hard link that already sits in
/// a writable folder would let a provider write it.
pub(crate) fn check_single_names(protected: &[PathBuf]) -> Result<(), PolicyError> {
    for root in protected {
        let mut pending = vec![root.clone()];
        let mut seen = 0usize;
        while let Some(path) = pending.pop() {
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(PolicyError::Io { path, error }),
            };
            seen += 1;
            if seen > PROTECTED_ENTRIES_MAX {
                let error = std::io::Error::other(format!("more than {PROTECTED_ENTRIES_MAX} entries to check"));
                return Err(PolicyError::Io { path: root.clone(), error });
            }
            if meta.is_dir() {
                let entries = fs::read_dir(&path).map_err(|error| PolicyError::Io { path: path.clone(), error })?;
                pending.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
            } else if meta.nlink() > 1 {
                return Err(PolicyError::HardLinked { path, links: meta.nlink() });
            }
        }
    }
    Ok(())
}

/// Open one rule's path. The open descriptor pins the inode the rule will
/// bind, so the overlap check is repeated on what was actually opened (a
/// symlink swapped since the policy was built cannot widen it).
fn open_rule(w: &Writable, protected: &[PathBuf]) -> Result<PathBeneath<PathFd>, PolicyError> {
    let fd =
        PathFd::new(&w.path).map_err(|e| PolicyError::Io { path: w.path.clone(), error: std::io::Error::other(e) })?;
    let opened = opened_path(&fd).unwrap_or_else(|| w.path.clone());
    let actual = [Writable { path: opened.clone(), origin: w.origin.clone() }];
    if let Some((p, _)) = overlap(&actual, protected) {
        return Err(PolicyError::Overlap {
            protected: p.clone(),
            writable: Writable { path: opened, origin: w.origin.clone() },
        });
    }
    // The magic link stats exactly the inode the descriptor holds.
    let is_dir = fs::metadata(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
        .or_else(|_| fs::metadata(&opened))
        .map(|m| m.is_dir())
        .unwrap_or(false);
    Ok(PathBeneath::new(fd, if is_dir { write_folder() } else { write_file() }))
}

/// The path the kernel has for an open descriptor.
fn opened_path(fd: &PathFd) -> Option<PathBuf> {
    fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())).ok()
}

/// Build the ruleset: read and execute everywhere, write on `writable`;
/// with `tcp_connect`, TCP restricted too: connect only to those ports,
/// and, when there are none, bind refused as well (no network at all).
/// Best effort: rights an older kernel lacks are dropped by the crate (the
/// status names them; the caller asks for network rules only on ABI 4 and
/// later); the returned descriptor is close-on-exec.
pub(crate) fn build(
    writable: &[Writable],
    protected: &[PathBuf],
    tcp_connect: Option<&[u16]>,
) -> Result<OwnedFd, PolicyError> {
    let ruleset_error = |e: landlock::RulesetError| PolicyError::Ruleset { message: e.to_string() };
    let root = PathFd::new(Path::new("/"))
        .map_err(|e| PolicyError::Io { path: PathBuf::from("/"), error: std::io::Error::other(e) })?;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled())
        .map_err(ruleset_error)?;
    if let Some(ports) = tcp_connect {
        ruleset = ruleset.handle_access(net_handled(ports)).map_err(ruleset_error)?;
    }
    let mut created = ruleset
        .create()
        .map_err(ruleset_error)?
        .add_rule(PathBeneath::new(root, read_exec()))
        .map_err(ruleset_error)?;
    for w in writable {
        created = created.add_rule(open_rule(w, protected)?).map_err(ruleset_error)?;
    }
    for &port in tcp_connect.unwrap_or_default() {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(ruleset_error)?;
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| PolicyError::Ruleset {
        message: "the kernel returned no ruleset (Landlock unavailable?)".into(),
    })
}

/// The network rights handled: connect always; bind too when nothing may
/// be connected to (a declared connection leaves binding alone: Landlock
/// would refuse even the ephemeral port some clients bind first).
fn net_handled(ports: &[u16]) -> BitFlags<AccessNet> {
    if ports.is_empty() {
        AccessNet::ConnectTcp | AccessNet::BindTcp
    } else {
        AccessNet::ConnectTcp.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_folders_never_allow_device_nodes() {
        assert!(!write_folder().contains(AccessFs::MakeBlock));
        assert!(!write_folder().contains(AccessFs::MakeChar));
        assert!(write_folder().contains(AccessFs::WriteFile | AccessFs::Truncate | AccessFs::Refer));
        assert!(!read_exec().intersects(AccessFs::from_write(TARGET_ABI)));
        // A rule on a file may only carry file rights, or the kernel says EINVAL.
        assert_eq!(write_file() & !AccessFs::from_file(TARGET_ABI), BitFlags::EMPTY);
    }

    #[test]
    fn no_declared_port_refuses_binding_too() {
        assert_eq!(net_handled(&[]), AccessNet::ConnectTcp | AccessNet::BindTcp);
        assert_eq!(net_handled(&[443]), BitFlags::from(AccessNet::ConnectTcp));
    }

    #[test]
    fn a_second_name_for_a_protected_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        fs::create_dir(&store).unwrap();
        fs::write(store.join("ledger"), b"x").unwrap();
        assert!(check_single_names(std::slice::from_ref(&store)).is_ok());
        fs::hard_link(store.join("ledger"), dir.path().join("other-name")).unwrap();
        let err = check_single_names(std::slice::from_ref(&store)).unwrap_err();
        assert!(matches!(&err, PolicyError::HardLinked { path, links: 2 } if path == &store.join("ledger")), "{err}");
        // A protected path that does not exist yet has nothing to check.
        assert!(check_single_names(&[dir.path().join("absent")]).is_ok());
    }
}
