//! Who may do a person's act: the plan's `people` lists operating-system
//! user names per act (default: any local user). `retry` covers a repair
//! and a rerun too: each sends a task's work again. `hold` (hold and
//! release) defaults to the `retry` list: who may send a task's work again
//! may also keep it from being sent. A refused act is recorded nowhere.

use crate::plan::model::People;

/// A person's act that `people` can restrict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Approve,
    Settle,
    Retry,
    /// `engine revise` (with `--raise` and `--approve-loosening`).
    Revise,
    /// `engine answer`: a person's answer to what an MCP server asked.
    Answer,
    /// `engine hold` and `engine release` (default: the `retry` list).
    Hold,
}

impl Act {
    pub const ALL: [Act; 6] = [Act::Approve, Act::Settle, Act::Retry, Act::Revise, Act::Answer, Act::Hold];

    /// The plan key (`people.approve`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Act::Approve => "approve",
            Act::Settle => "settle",
            Act::Retry => "retry",
            Act::Revise => "revise",
            Act::Answer => "answer",
            Act::Hold => "hold",
        }
    }

    fn list(self, people: &People) -> Option<&[String]> {
        match self {
            Act::Approve => people.approve.as_deref(),
            Act::Settle => people.settle.as_deref(),
            Act::Retry => people.retry.as_deref(),
            Act::Revise => people.revise.as_deref(),
            Act::Answer => people.answer.as_deref(),
            Act::Hold => people.hold.as_deref().or(people.retry.as_deref()),
        }
    }
}

/// Why an act was refused: who tried, and who may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub act: Act,
    pub user: String,
    pub allowed: Vec<String>,
}

impl Refused {
    pub fn message(&self) -> String {
        format!(
            "user `{}` may not {}: the plan's `people.{}` allows only {}; nothing was recorded",
            self.user,
            self.act.key(),
            self.act.key(),
            if self.allowed.is_empty() { "nobody".to_string() } else { self.allowed.join(", ") }
        )
    }
}

/// May `user` do `act` under `people` (the goal's active plan's)?
pub fn permitted(people: Option<&People>, act: Act, user: &str) -> Result<(), Refused> {
    match people.and_then(|p| act.list(p)) {
        Some(list) if !list.iter().any(|u| u == user) => {
            Err(Refused { act, user: user.to_string(), allowed: list.to_vec() })
        }
        _ => Ok(()),
    }
}

/// A revision that changes who may do an act must come from someone the
/// lists in force allow to do it: otherwise anyone could revise the plan
/// to name themselves.
pub fn may_change(now: Option<&People>, next: Option<&People>, user: &str) -> Result<(), Refused> {
    let empty = People::default();
    let (now_p, next_p) = (now.unwrap_or(&empty), next.unwrap_or(&empty));
    for act in Act::ALL {
        if act.list(now_p) != act.list(next_p) {
            permitted(now, act, user)?;
        }
    }
    Ok(())
}

/// Does `next` change any act's list from `now`?
pub fn changes(now: Option<&People>, next: Option<&People>) -> bool {
    let empty = People::default();
    let (now, next) = (now.unwrap_or(&empty), next.unwrap_or(&empty));
    Act::ALL.iter().any(|a| a.list(now) != a.list(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn people(approve: Option<&[&str]>, settle: Option<&[&str]>, retry: Option<&[&str]>) -> People {
        let v = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| s.to_string()).collect());
        People { approve: v(approve), settle: v(settle), retry: v(retry), revise: None, answer: None, hold: None }
    }

    #[test]
    fn without_a_list_any_user_may_act() {
        for act in Act::ALL {
            assert_eq!(permitted(None, act, "mallory"), Ok(()));
            assert_eq!(permitted(Some(&People::default()), act, "mallory"), Ok(()));
        }
    }

    #[test]
    fn a_list_admits_exactly_its_names_per_act() {
        let p = people(Some(&["alice"]), Some(&["alice", "bob"]), Some(&["alice"]));
        assert_eq!(permitted(Some(&p), Act::Approve, "alice"), Ok(()));
        assert_eq!(permitted(Some(&p), Act::Settle, "bob"), Ok(()));
        let r = permitted(Some(&p), Act::Retry, "bob").unwrap_err();
        assert_eq!((r.act, r.user.as_str(), r.allowed.clone()), (Act::Retry, "bob", vec!["alice".to_string()]));
        assert!(r.message().contains("people.retry") && r.message().contains("alice"), "{}", r.message());
        // Names match exactly: no prefix, no case folding.
        assert!(permitted(Some(&p), Act::Approve, "alic").is_err());
        assert!(permitted(Some(&p), Act::Approve, "Alice").is_err());
        // An empty list admits nobody.
        let nobody = people(Some(&[]), None, None);
        assert!(permitted(Some(&nobody), Act::Approve, "alice").unwrap_err().message().contains("nobody"));
        assert_eq!(permitted(Some(&nobody), Act::Settle, "alice"), Ok(()));
    }

    #[test]
    fn hold_defaults_to_the_retry_people_and_its_own_list_wins() {
        let p = people(None, None, Some(&["alice"]));
        assert_eq!(permitted(Some(&p), Act::Hold, "alice"), Ok(()));
        let r = permitted(Some(&p), Act::Hold, "bob").unwrap_err();
        assert!(r.message().contains("people.hold"), "{}", r.message());
        let own = People { hold: Some(vec!["bob".to_string()]), ..p };
        assert_eq!(permitted(Some(&own), Act::Hold, "bob"), Ok(()));
        assert!(permitted(Some(&own), Act::Hold, "alice").is_err());
        assert_eq!(permitted(None, Act::Hold, "mallory"), Ok(()));
    }

    #[test]
    fn changing_a_list_takes_someone_it_admits_now() {
        let now = people(Some(&["alice"]), None, Some(&["alice"]));
        let widened = people(Some(&["alice", "bob"]), None, Some(&["alice"]));
        assert_eq!(may_change(Some(&now), Some(&widened), "alice"), Ok(()));
        assert_eq!(may_change(Some(&now), Some(&widened), "bob").unwrap_err().act, Act::Approve);
        // Dropping the lists is a change too.
        assert!(may_change(Some(&now), None, "bob").is_err());
        // Unchanged lists: anyone may revise the rest of the plan.
        assert_eq!(may_change(Some(&now), Some(&now), "bob"), Ok(()));
        // No lists yet: anyone may add them.
        assert_eq!(may_change(None, Some(&now), "bob"), Ok(()));
        assert!(changes(Some(&now), Some(&widened)) && changes(Some(&now), None) && changes(None, Some(&now)));
        assert!(!changes(Some(&now), Some(&now)) && !changes(None, Some(&People::default())));
    }
}
