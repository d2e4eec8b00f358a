//! `engine retry`: may a person's retry re-send this operation? Only the
//! task's latest call, and only when its outcome is known not to stand in
//! the way: settled `not_run` by a person, waiting on an approval, or
//! failed with a class a retry can help.

use super::in_doubt::Observed;
use crate::state::{AttemptState, FailureClass, TaskState};

/// The operation's newest attempt, as the decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestTry {
    pub try_no: i64,
    pub state: AttemptState,
    pub class: Option<FailureClass>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A repair or a revision replaced it, or the task completed.
    NotLatestCall,
    /// Its outcome is unknown: a person settles it first.
    Unknown,
    /// Its latest try is in a state (and class) a retry does not fix.
    NotRetryable { try_no: i64, state: AttemptState, class: Option<FailureClass> },
    /// Nothing was ever sent: a plain run sends it.
    NoAttempt,
}

impl Refusal {
    /// What a person reads after "not retryable: ".
    pub fn why(&self) -> String {
        match self {
            Refusal::NotLatestCall => "it is not the task's latest call".to_string(),
            Refusal::Unknown => "its outcome is unknown: a person settles it first".to_string(),
            Refusal::NotRetryable { try_no, state, class } => format!(
                "its latest try ({try_no}) is `{state}`{}",
                class
                    .map(|c| format!(" with class {c}, which a re-send of the same request does not fix"))
                    .unwrap_or_default()
            ),
            Refusal::NoAttempt => "it has no attempt yet: a plain run sends it".to_string(),
        }
    }
}

/// Classes whose failure a re-send of the same request can fix.
pub fn class_is_retryable(class: FailureClass) -> bool {
    matches!(
        class,
        FailureClass::ProviderUnavailable | FailureClass::Timeout | FailureClass::Killed | FailureClass::Environment
    )
}

/// `latest`: the operation's newest try; `latest_call_is_other`: the task's
/// newest attempt in its revision belongs to another operation.
pub fn decide(task_state: TaskState, latest: Option<LatestTry>, latest_call_is_other: bool) -> Result<(), Refusal> {
    if matches!(task_state, TaskState::Succeeded | TaskState::Reused) || latest_call_is_other {
        return Err(Refusal::NotLatestCall);
    }
    if task_state == TaskState::AwaitingApproval {
        return Ok(());
    }
    match latest {
        Some(t) if t.state == AttemptState::SettledNotRun => Ok(()),
        Some(t) if t.state == AttemptState::Failed && t.class.is_some_and(class_is_retryable) => Ok(()),
        Some(t) if t.state == AttemptState::EffectUnknown => Err(Refusal::Unknown),
        Some(t) => Err(Refusal::NotRetryable { try_no: t.try_no, state: t.state, class: t.class }),
        None => Err(Refusal::NoAttempt),
    }
}

/// What a person's retry does once the target was read back (the task
/// declares `observe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeforeResend {
    /// Absent, or nothing to read back: send it, as asked.
    Send,
    /// The effect is there: completed from that evidence, nothing sent.
    Completed,
    /// The read-back could not tell: nothing sent, it stays unknown.
    StaysUnknown,
}

pub fn before_resend(observed: Observed) -> BeforeResend {
    match observed {
        Observed::Present | Observed::Answered => BeforeResend::Completed,
        Observed::Absent | Observed::NotObservable => BeforeResend::Send,
        Observed::Inconclusive => BeforeResend::StaysUnknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(state: AttemptState, class: Option<FailureClass>) -> Option<LatestTry> {
        Some(LatestTry { try_no: 1, state, class })
    }

    #[test]
    fn retryable_calls() {
        assert_eq!(decide(TaskState::Pending, t(AttemptState::SettledNotRun, None), false), Ok(()));
        assert_eq!(decide(TaskState::AwaitingApproval, None, false), Ok(()), "an approval may have come");
        for class in FailureClass::ALL {
            let got = decide(TaskState::Failed, t(AttemptState::Failed, Some(*class)), false);
            assert_eq!(got.is_ok(), class_is_retryable(*class), "{class}");
        }
        assert!(class_is_retryable(FailureClass::Killed) && !class_is_retryable(FailureClass::ValidationFailed));
    }

    #[test]
    fn a_retry_reads_back_first_and_sends_only_what_is_absent() {
        assert_eq!(before_resend(Observed::Present), BeforeResend::Completed);
        assert_eq!(before_resend(Observed::Answered), BeforeResend::Completed);
        assert_eq!(before_resend(Observed::Absent), BeforeResend::Send);
        assert_eq!(before_resend(Observed::NotObservable), BeforeResend::Send, "nothing to read back: as before");
        assert_eq!(before_resend(Observed::Inconclusive), BeforeResend::StaysUnknown);
    }

    #[test]
    fn refused_calls_say_why() {
        assert_eq!(
            decide(TaskState::Succeeded, t(AttemptState::SettledNotRun, None), false),
            Err(Refusal::NotLatestCall)
        );
        assert_eq!(decide(TaskState::Failed, t(AttemptState::SettledNotRun, None), true), Err(Refusal::NotLatestCall));
        assert_eq!(
            decide(TaskState::EffectUnknown, t(AttemptState::EffectUnknown, None), false),
            Err(Refusal::Unknown)
        );
        assert_eq!(decide(TaskState::Pending, None, false), Err(Refusal::NoAttempt));
        let r = decide(TaskState::Failed, t(AttemptState::Failed, Some(FailureClass::ValidationFailed)), false);
        assert_eq!(
            r.unwrap_err().why(),
            "its latest try (1) is `failed` with class validation_failed, which a re-send of the same request does not fix"
        );
    }
}
