//! Who is acting: the operating-system user the engine runs as (its uid,
//! and the name the system's user database gives it), beside the free-text
//! `--actor` label. The name is read from the system (`getpwuid_r`), not
//! from `$USER`, which any caller can set.

use std::ffi::CStr;

use crate::store::acts::Person;

/// The person acting now: `actor` as given, or the user's name.
pub fn who(actor: Option<&str>) -> Person {
    let uid = current_uid();
    let user = user_name(uid).unwrap_or_else(|| format!("uid:{uid}"));
    let actor = actor.map(str::to_string).unwrap_or_else(|| user.clone());
    Person { actor, uid, user }
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The user database's name for `uid`, if it has one. (One libc call; the
/// crates that wrap it bring far more than this needs.)
fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 16 * 1024];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_the_systems_not_the_environments() {
        let p = who(None);
        assert_eq!(p.uid, current_uid());
        assert_eq!(p.actor, p.user);
        let id = std::process::Command::new("id").arg("-un").output().unwrap();
        assert_eq!(p.user, String::from_utf8_lossy(&id.stdout).trim());
        let labelled = who(Some("ops on call"));
        assert_eq!((labelled.actor.as_str(), labelled.user.as_str()), ("ops on call", p.user.as_str()));
    }
}
