//! The run's namespaces, made once and joined by each provider process
//! (`setns`, one system call in the child before `exec`):
//!
//! - a **network namespace** with only a loopback, for processes that
//!   may have no network (`network` not declared);
//! - a **mount namespace** in which every folder that holds stores (the
//!   run's own store's folder, the stores' root) is covered by an empty
//!   read-only `tmpfs`: a provider sees nothing of any store — it cannot
//!   read one, nor change its owner, mode, extended attributes or times,
//!   which Landlock's file rules do not cover.
//!
//! Why once per run and not per process: making a network namespace costs
//! about 0.5 ms of kernel time (and more to tear it down, later, in a
//! kernel worker); joining one costs about 1 µs (docs/sandbox.md, "Cost").
//! Every process of the run that has no network shares the one loopback;
//! none of them reaches anything outside it.
//!
//! Both are made by a short-lived thread of their own: `unshare` changes the
//! namespaces of the calling thread only, so the engine's threads keep the
//! machine's. Making them needs `CAP_SYS_ADMIN` (root); without it, each is
//! [`Unavailable`](NsStatus::Unavailable) with the kernel's reason, and the
//! statuses recorded on every attempt say what was not covered.

use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The namespaces of one run, or why each could not be made.
#[derive(Debug, Clone)]
pub struct Namespaces {
    net: Result<Arc<OwnedFd>, String>,
    mnt: Result<Arc<OwnedFd>, String>,
    hidden: Vec<PathBuf>,
}

/// Whether the stores are out of a process's sight: recorded on every
/// attempt (`{"state": "hidden"}`, `{"state": "unavailable", "reason":
/// "..."}`, `{"state": "disabled"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum NsStatus {
    /// Covered: the process sees empty read-only folders where stores are.
    Hidden,
    /// Not covered: it sees them (Landlock still keeps it from writing the
    /// run's store, not from reading it or changing its metadata).
    Unavailable { reason: String },
    /// `"sandbox": "none"`.
    Disabled,
}

impl NsStatus {
    pub fn word(&self) -> &'static str {
        match self {
            NsStatus::Hidden => "hidden",
            NsStatus::Unavailable { .. } => "unavailable",
            NsStatus::Disabled => "disabled",
        }
    }
}

impl fmt::Display for NsStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NsStatus::Hidden => f.write_str("hidden (an empty read-only folder over each stores folder)"),
            NsStatus::Unavailable { reason } => write!(f, "not hidden ({reason})"),
            NsStatus::Disabled => f.write_str("not hidden (sandbox none)"),
        }
    }
}

impl Namespaces {
    /// Make the run's namespaces, hiding each folder of `hide` (folders that
    /// do not exist are skipped: nothing is there to hide). Never fails:
    /// what cannot be made is unavailable, with the reason.
    pub fn make(hide: &[PathBuf]) -> Namespaces {
        let hide: Vec<PathBuf> = hide.iter().filter(|p| p.is_dir()).cloned().collect();
        let for_thread = hide.clone();
        let made = std::thread::Builder::new()
            .name("engine-namespaces".into())
            .spawn(move || make_here(&for_thread))
            .map_err(|e| e.to_string())
            .and_then(|t| t.join().map_err(|_| "the thread making them failed".to_string()));
        match made {
            Ok((net, mnt)) => Namespaces {
                net: net.map(Arc::new).map_err(|e| e.to_string()),
                mnt: mnt.map(Arc::new).map_err(|e| e.to_string()),
                hidden: hide,
            },
            Err(e) => Namespaces::unavailable(&e),
        }
    }

    /// None at all, for this reason (a testing aid, or a run that makes
    /// none).
    pub fn unavailable(reason: &str) -> Namespaces {
        Namespaces { net: Err(reason.to_owned()), mnt: Err(reason.to_owned()), hidden: Vec::new() }
    }

    /// The network namespace's descriptor, or why there is none.
    pub(crate) fn net(&self) -> Result<RawFd, &str> {
        self.net.as_ref().map(|fd| fd.as_raw_fd()).map_err(String::as_str)
    }

    /// The mount namespace's descriptor, or why there is none.
    pub(crate) fn mnt(&self) -> Result<RawFd, &str> {
        self.mnt.as_ref().map(|fd| fd.as_raw_fd()).map_err(String::as_str)
    }

    pub(crate) fn net_fd(&self) -> Option<Arc<OwnedFd>> {
        self.net.as_ref().ok().cloned()
    }

    pub(crate) fn mnt_fd(&self) -> Option<Arc<OwnedFd>> {
        self.mnt.as_ref().ok().cloned()
    }

    /// The folders covered in the mount namespace.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// What a confined process that joins the mount namespace gets.
    pub fn stores_status(&self) -> NsStatus {
        match self.mnt() {
            Ok(_) => NsStatus::Hidden,
            Err(reason) => NsStatus::Unavailable { reason: reason.to_owned() },
        }
    }
}

type Made = (io::Result<OwnedFd>, io::Result<OwnedFd>);

/// On a thread of its own (which ends right after): its own file-system
/// attributes, then a network namespace and a mount namespace for it.
fn make_here(hide: &[PathBuf]) -> Made {
    // SAFETY: unshare changes only this thread's attributes.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        let e = io::Error::last_os_error();
        return (Err(io::Error::new(e.kind(), e.to_string())), Err(e));
    }
    let net = make_net();
    let mnt = make_mnt(hide);
    (net.map_err(|e| named("network namespace", e)), mnt.map_err(|e| named("mount namespace", e)))
}

fn named(what: &str, e: io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::EPERM) => "needs CAP_SYS_ADMIN (run the engine as root)".to_string(),
        _ => e.to_string(),
    };
    io::Error::new(e.kind(), format!("cannot make a {what}: {why}"))
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn make_net() -> io::Result<OwnedFd> {
    // SAFETY: this thread only.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) })?;
    loopback_up()?;
    Ok(File::open("/proc/thread-self/ns/net")?.into())
}

/// A fresh network namespace's loopback is down; bring it up, so a
/// process may still talk to itself (a test server of its own).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket we close below; `ifreq` is plain data.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(sock)?;
        let sock = OwnedFd::from_raw_fd(sock);
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req))?;
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req))
    }
}

fn make_mnt(hide: &[PathBuf]) -> io::Result<OwnedFd> {
    // SAFETY: this thread only (its file-system attributes are its own).
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // Mounts made here never reach the machine's namespace; the
    // machine's still reach this one.
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_SLAVE, None)?;
    for dir in hide {
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        mount(Some("tmpfs"), dir, Some("tmpfs"), flags, Some("size=4k,mode=0555"))
            .map_err(|e| io::Error::new(e.kind(), format!("covering {}: {e}", dir.display())))?;
    }
    Ok(File::open("/proc/thread-self/ns/mnt")?.into())
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let c = |s: &str| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let source = source.map(c).transpose()?;
    let fstype = fstype.map(c).transpose()?;
    let data = data.map(c).transpose()?;
    let target =
        CString::new(target.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: NUL-terminated strings alive for the call, or NULL.
    check(unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data) as *const libc::c_void) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        // SAFETY: no arguments.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn as_root_both_are_made_and_the_machine_keeps_its_own() {
        if !is_root() {
            return; // the unprivileged case: `without_privileges_each_is_unavailable_with_its_reason`
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), b"x").unwrap();
        let ns = Namespaces::make(&[dir.path().to_path_buf(), dir.path().join("absent")]);
        assert!(ns.net().is_ok() && ns.mnt().is_ok(), "{:?} {:?}", ns.net(), ns.mnt());
        assert_eq!(ns.hidden(), [dir.path().to_path_buf()], "a missing folder is skipped");
        assert_eq!(ns.stores_status(), NsStatus::Hidden);
        // This thread (and process) still sees the folder and its network.
        assert!(dir.path().join("secret").exists());
        let own = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let theirs = std::fs::read_link(format!("/proc/self/fd/{}", ns.net().unwrap())).unwrap();
        assert_ne!(own, theirs, "a namespace of its own");
    }

    #[test]
    fn unavailable_says_why() {
        let ns = Namespaces::unavailable("a testing aid");
        assert_eq!(ns.stores_status(), NsStatus::Unavailable { reason: "a testing aid".into() });
        assert_eq!(ns.net().unwrap_err(), "a testing aid");
        assert_eq!(NsStatus::Hidden.word(), "hidden");
        assert_eq!(serde_json::to_value(NsStatus::Hidden).unwrap(), serde_json::json!({"state": "hidden"}));
    }
}
