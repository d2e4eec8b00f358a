//! A confined process's privileges: none. Every process the engine starts
//! in a sandbox (unless the plan says `"sandbox": "none"`) drops, before
//! `exec` (`crate::spawn`; where the spawner thread clones it,
//! `crate::spawn::spawner`, most of it is held already from that thread,
//! and the child only checks that and empties its capability sets):
//!
//! - every capability: the bounding set (so an `exec` as root regains
//!   none), the ambient, inheritable, permitted and effective sets — a
//!   root provider had kept `CAP_DAC_READ_SEARCH` (so `open_by_handle_at`
//!   read a hidden store by its handle), `CAP_SYS_PTRACE` (so it read any
//!   root process's environment) and the rest;
//! - new privileges (`no_new_privs`: no set-uid program, no file
//!   capability gives any back);
//! - a seccomp filter refusing (`EPERM`) the system calls that reach past
//!   a path-based sandbox or into other processes, capabilities or not:
//!   file handles (`open_by_handle_at`, `name_to_handle_at`), `ptrace`,
//!   `process_vm_readv`/`writev`, the mount family and the kernel keyrings.
//!
//! Without its capabilities a root provider also reads no other process's
//! environment: the kernel lets a process read `/proc/PID/environ` only of
//! a process whose capabilities are a subset of its own, and Landlock only
//! of its own domain (its descendants).
//!
//! The filter is built once, in the parent (`filter`: a binary search over
//! the refused numbers, for this architecture: a system call of another
//! architecture's numbering kills the process); the spawner thread (for
//! the children it clones) or each other child only passes its address to
//! `seccomp(2)`. On x86-64 the x32 numbers of the same calls are
//! refused too.

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What a process's privileges were, as an attempt records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Privileges {
    /// No capability, `no_new_privs`, the seccomp filter.
    Dropped,
    /// No capability and `no_new_privs`, but no seccomp filter (`reason`).
    Partial { reason: String },
    /// `"sandbox": "none"`: the process keeps the engine's privileges.
    Disabled,
}

impl Privileges {
    pub fn word(&self) -> &'static str {
        match self {
            Privileges::Dropped => "dropped",
            Privileges::Partial { .. } => "partial",
            Privileges::Disabled => "disabled",
        }
    }

    /// What a confined process gets on this machine.
    pub fn here() -> Privileges {
        match filter().as_ref() {
            Ok(_) => Privileges::Dropped,
            Err(reason) => Privileges::Partial { reason: reason.clone() },
        }
    }
}

impl fmt::Display for Privileges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Privileges::Dropped => f.write_str("none (no capability, no new privileges, seccomp filter)"),
            Privileges::Partial { reason } => {
                write!(f, "no capability, no new privileges; no seccomp filter ({reason})")
            }
            Privileges::Disabled => f.write_str("the engine's (sandbox none)"),
        }
    }
}

/// The kernel's `struct sock_fprog`: a filter's length and address.
#[repr(C)]
pub(crate) struct Fprog {
    len: libc::c_ushort,
    filter: *const super::filter::Insn,
}

/// The filter's program for `seccomp(2)`, built once (`Err`: why this
/// machine gets none). The program lives for the whole process.
pub(crate) fn program() -> Result<Fprog, String> {
    let f = filter().as_ref().map_err(Clone::clone)?;
    Ok(Fprog { len: f.len() as libc::c_ushort, filter: f.as_ptr() })
}

/// The highest capability this kernel knows, found once by reading the
/// bounding set upward until the kernel says a number is none
/// (`EINVAL`): right on a kernel of any age, where a guess would be too
/// high (a 5.7 kernel refuses 40) or too low (a later kernel's new ones
/// left in the set). 0 where even capability 0 is none. A read refused
/// for another reason (a container's filter) proves no end: then 63, the
/// last a capability set can hold (a drop or a read past the kernel's
/// last is `EINVAL`, which every user takes as "in no set").
pub(crate) fn last_cap() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        for cap in 0..=255u32 {
            // SAFETY: a read of this thread's bounding set, nothing changed.
            if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } < 0 {
                return match errno() {
                    libc::EINVAL => cap.saturating_sub(1),
                    _ => 63,
                };
            }
        }
        255
    })
}

/// No new privileges, then every capability dropped: the bounding set
/// (without `CAP_SETPCAP` — a process that is not root — it cannot shrink,
/// and with no new privileges and no permitted capability an `exec` gains
/// none from it), the ambient set, then the inheritable, permitted and
/// effective sets. In the child before `exec` (`crate::spawn`): system
/// calls on its own stack only, nothing allocated.
pub(crate) unsafe fn drop_privileges(last_cap: i64) -> Result<(), libc::c_int> {
    drop_bounding(last_cap)?;
    drop_sets()
}

/// The first part of [`drop_privileges`]: no new privileges, the bounding
/// set and the ambient set emptied. All three are the calling thread's own
/// and a `clone` copies them, so the providers' spawner thread does this
/// once for every child it starts (`crate::spawn::spawner`); the child then
/// only empties its other sets ([`drop_sets`]).
pub(crate) unsafe fn drop_bounding(last_cap: i64) -> Result<(), libc::c_int> {
    let check = |r: libc::c_int| if r < 0 { Err(errno()) } else { Ok(()) };
    check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
    for cap in 0..=last_cap as libc::c_ulong {
        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 {
            match errno() {
                libc::EPERM => break,
                libc::EINVAL => {}
                e => return Err(e),
            }
        }
    }
    let cleared = libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if cleared < 0 && errno() != libc::EINVAL {
        return Err(errno());
    }
    Ok(())
}

/// The last part of [`drop_privileges`]: the inheritable, permitted and
/// effective sets emptied (one `capset`). Left to the child: until then it
/// joins the run's namespaces and enters its working folder with the
/// engine's capabilities, as it always did.
pub(crate) unsafe fn drop_sets() -> Result<(), libc::c_int> {
    // `struct __user_cap_header_struct` (version 3) and two
    // `__user_cap_data_struct`s of zeros: no capability in any set.
    let mut header: [u32; 2] = [0x2008_0522, 0];
    let mut data: [u32; 6] = [0; 6];
    if libc::syscall(libc::SYS_capset, header.as_mut_ptr(), data.as_mut_ptr()) < 0 {
        return Err(errno());
    }
    Ok(())
}

/// Install the filter `prog` points to (`program`): in a child before
/// `exec`, or once on the spawner thread for the children it clones.
pub(crate) unsafe fn install_filter(prog: *const Fprog) -> Result<(), libc::c_int> {
    const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
    if libc::syscall(libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0u32, prog) < 0 {
        return Err(errno());
    }
    Ok(())
}

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn filter() -> &'static Result<Vec<super::filter::Insn>, String> {
    static FILTER: OnceLock<Result<Vec<super::filter::Insn>, String>> = OnceLock::new();
    FILTER.get_or_init(build)
}

/// x32's system calls on x86-64: the same numbers with this bit set, and a
/// few of their own.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// The system calls refused, by this architecture's numbers.
fn refused() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ];
    #[cfg(target_arch = "x86_64")]
    {
        // x32's own numbers of `ptrace`, `process_vm_readv`, `process_vm_writev`.
        let own = [521, 539, 540];
        let shared: Vec<i64> = calls.iter().map(|n| n | X32).collect();
        calls.extend(shared);
        calls.extend(own.map(|n| n | X32));
    }
    calls
}

fn build() -> Result<Vec<super::filter::Insn>, String> {
    let arch = audit_arch()?;
    available()?;
    let refused: Vec<u32> = refused().into_iter().map(|n| n as u32).collect();
    super::filter::program(arch, &refused, REFUSE)
}

/// What a refused call returns: `EPERM`.
const REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;

/// This architecture's `AUDIT_ARCH_*`, which a system call's must match.
fn audit_arch() -> Result<u32, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(0xC000_003E),
        "aarch64" => Ok(0xC000_00B7),
        "riscv64" => Ok(0xC000_00F3),
        other => Err(format!("no seccomp filter for the {other} architecture")),
    }
}

/// Does this kernel take seccomp filters that return an errno?
fn available() -> Result<(), String> {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 at the address given.
    let r = unsafe { libc::syscall(libc::SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) };
    if r != 0 {
        return Err(format!("this kernel takes no seccomp filter ({})", std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_capability_found_by_probing_is_the_one_the_kernel_names() {
        let Ok(named) = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap") else {
            eprintln!("no cap_last_cap here: nothing to compare");
            return;
        };
        assert_eq!(last_cap(), named.trim().parse::<u32>().unwrap());
    }

    #[test]
    fn the_filter_refuses_each_call_it_names_by_this_architectures_number() {
        let calls = refused();
        for n in [libc::SYS_open_by_handle_at, libc::SYS_ptrace, libc::SYS_keyctl, libc::SYS_mount] {
            assert!(calls.contains(&n), "{n}");
        }
        #[cfg(target_arch = "x86_64")]
        assert!(calls.contains(&(libc::SYS_open_by_handle_at | X32)) && calls.contains(&(521 | X32)));
        let program = filter().as_ref().expect("a filter on this machine");
        assert!(!program.is_empty() && program.len() < 4096, "{}", program.len());
        assert_eq!(Privileges::here(), Privileges::Dropped);
    }

    /// The program as it was built before the search (one comparison a
    /// number, `seccompiler`).
    fn listed() -> Vec<super::super::filter::Insn> {
        use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let rules = refused().into_iter().map(|n| (n, Vec::new())).collect();
        let refuse = SeccompAction::Errno(libc::EPERM as u32);
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, refuse, arch).unwrap();
        let prog = seccompiler::BpfProgram::try_from(filter).unwrap();
        prog.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
    }

    #[test]
    fn the_filter_decides_every_call_as_the_listed_one_in_few_steps() {
        use super::super::filter::tests::{run, MAX_STEPS};
        let (ours, listed) = (filter().as_ref().unwrap(), listed());
        let arch = audit_arch().unwrap();
        let numbers = (0..2048u32).chain((0..2048).map(|n| n | 0x4000_0000)).chain([u32::MAX, 0x8000_0000]);
        let mut refused = 0;
        for nr in numbers {
            for a in [arch, 0x4000_0003, 0xC000_00B7, 0] {
                let (want, slow) = run(&listed, a, nr);
                let (got, steps) = run(ours, a, nr);
                assert_eq!(got, want, "arch {a:#x}, nr {nr:#x}");
                assert!(steps <= MAX_STEPS, "arch {a:#x}, nr {nr:#x}: {steps} steps (the list took {slow})");
                refused += usize::from(a == arch && got == REFUSE);
            }
        }
        assert_eq!(refused, super::refused().len(), "each refused number, and no other");
        // What the kernel's cache emulation pays for one allowed number.
        assert!(run(&listed, arch, 0).1 > 4 * run(ours, arch, 0).1);
    }

    #[test]
    fn the_recorded_words_are_stable() {
        use serde_json::json;
        for (p, v) in [
            (Privileges::Dropped, json!({"state": "dropped"})),
            (Privileges::Partial { reason: "r".into() }, json!({"state": "partial", "reason": "r"})),
            (Privileges::Disabled, json!({"state": "disabled"})),
        ] {
            assert_eq!(serde_json::to_value(&p).unwrap(), v);
            assert_eq!(v["state"], p.word());
            assert_eq!(serde_json::from_value::<Privileges>(v).unwrap(), p);
        }
    }
}
