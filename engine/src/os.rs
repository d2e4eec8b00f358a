//! Operating-system users and groups, as the system's databases give them
//! (`getpwuid_r`, `getgrnam_r`, `getgrgid_r`) and as this process holds
//! them (`getuid`, `getgid`, `getgroups`) — never from the environment
//! (`$USER`), which any caller can set. One libc call each; the crates
//! that wrap them bring far more than this needs.

use std::ffi::{CStr, CString};

/// The buffer the `get*_r` calls fill (names and member lists); a group
/// with more members than fit is looked up again with a larger one, up
/// to `LOOKUP_BYTES_MAX`.
const LOOKUP_BYTES: usize = 16 * 1024;
const LOOKUP_BYTES_MAX: usize = 1024 * 1024;

/// The groups a process may hold (`NGROUPS_MAX` on Linux is 65,536).
const GROUPS_MAX: usize = 65_536;

/// The real uid of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The groups this process acts with: its real and effective group and
/// its supplementary groups.
pub fn groups() -> Vec<u32> {
    // SAFETY: getgid and getegid have no preconditions and cannot fail.
    let mut out = unsafe { vec![libc::getgid(), libc::getegid()] };
    // SAFETY: with a size of 0, getgroups only returns the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n > 0 {
        let mut list = vec![0 as libc::gid_t; (n as usize).min(GROUPS_MAX)];
        // SAFETY: `list` holds `list.len()` gids, the size passed.
        let got = unsafe { libc::getgroups(list.len() as libc::c_int, list.as_mut_ptr()) };
        if got > 0 {
            list.truncate(got as usize);
            out.extend(list);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The user database's name for `uid`, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; LOOKUP_BYTES];
    // SAFETY: `passwd` is plain data the call fills in; `buf` outlives every
    // pointer into it that the call stores in `pwd`, and its length is the
    // one passed. On success `result` points at `pwd` and `pw_name` at a
    // NUL-terminated string inside `buf`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        CStr::from_ptr(pwd.pw_name).to_str().ok().map(str::to_string)
    }
}

/// A group, by its id and name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    pub gid: u32,
    pub name: String,
}

/// The group named `name`, if the group database has it.
pub fn group_named(name: &str) -> Option<Group> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: as in `group_lookup`; the name is NUL-terminated and outlives the call.
    group_lookup(|grp, buf, len, result| unsafe { libc::getgrnam_r(c_name.as_ptr(), grp, buf, len, result) })
}

/// The group with id `gid`, if the group database has it.
pub fn group_of(gid: u32) -> Option<Group> {
    // SAFETY: as in `group_lookup`.
    group_lookup(|grp, buf, len, result| unsafe { libc::getgrgid_r(gid, grp, buf, len, result) })
}

/// One `getgr*_r` call, its buffer grown while the group does not fit.
fn group_lookup(
    call: impl Fn(*mut libc::group, *mut libc::c_char, usize, *mut *mut libc::group) -> libc::c_int,
) -> Option<Group> {
    let mut len = LOOKUP_BYTES;
    while len <= LOOKUP_BYTES_MAX {
        let mut buf = vec![0u8; len];
        // SAFETY: `group` is plain data the call fills in; `buf` outlives
        // every pointer into it the call stores there, and its length is
        // the one passed. On success `result` points at `grp` and
        // `gr_name` at a NUL-terminated string inside `buf`.
        unsafe {
            let mut grp: libc::group = std::mem::zeroed();
            let mut result: *mut libc::group = std::ptr::null_mut();
            match call(&mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut result) {
                libc::ERANGE => len *= 4,
                0 if !result.is_null() && !grp.gr_name.is_null() => {
                    let name = CStr::from_ptr(grp.gr_name).to_str().ok()?.to_string();
                    return Some(Group { gid: grp.gr_gid, name });
                }
                _ => return None,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_system_databases() {
        let id = |flag: &str| {
            let out = std::process::Command::new("id").arg(flag).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(user_name(uid()), Some(id("-un")));
        let gid: u32 = id("-g").parse().unwrap();
        let group = group_of(gid).expect("the primary group");
        assert_eq!(group.name, id("-gn"));
        assert_eq!(group_named(&group.name), Some(group.clone()));
        assert!(groups().contains(&gid));
        assert_eq!(group_named("no-such-group-of-the-engine"), None);
        assert_eq!(group_named("nul\0byte"), None);
    }
}
