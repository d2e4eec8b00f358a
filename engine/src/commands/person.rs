//! Who is acting: the operating-system user the engine runs as (its uid,
//! and the name the system's user database gives it), beside the free-text
//! `--actor` label. The name is read from the system (`getpwuid_r`), not
//! from `$USER`, which any caller can set.

use crate::store::acts::Person;

/// The person acting now: `actor` as given, or the user's name.
pub fn who(actor: Option<&str>) -> Person {
    let uid = crate::os::uid();
    let user = crate::os::user_name(uid).unwrap_or_else(|| format!("uid:{uid}"));
    let actor = actor.map(str::to_string).unwrap_or_else(|| user.clone());
    Person { actor, uid, user }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_the_systems_not_the_environments() {
        let p = who(None);
        assert_eq!(p.uid, crate::os::uid());
        assert_eq!(p.actor, p.user);
        let id = std::process::Command::new("id").arg("-un").output().unwrap();
        assert_eq!(p.user, String::from_utf8_lossy(&id.stdout).trim());
        let labelled = who(Some("ops on call"));
        assert_eq!((labelled.actor.as_str(), labelled.user.as_str()), ("ops on call", p.user.as_str()));
    }
}
