//! A provider's answer judged on the provider's own terms: the receipt's
//! verdict, as a pure decision. The driver reports the facts it read in
//! the receipt's transaction and records what this decides
//! (`run::driver::receipt`); it picks nothing itself.

/// What the receipt's verdict looks at: `Q`, the question a server asked a
/// person; `S`, the scope it wants; `O`, what a task judged by its
/// receipt alone is checked against (each passed through to the verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<Q, S, O> {
    /// The answer is a question for a person (an MCP server asked).
    pub question: Option<Q>,
    /// The server refused the call for want of this scope.
    pub step_up_scope: Option<S>,
    /// On the provider's terms the answer is a success (exit 0, a 2xx, a
    /// result that is no error, an agent's report that says so, no
    /// undeclared spending).
    pub ok: bool,
    /// The task is judged by its receipt alone: the checkpoint observed now.
    pub unchecked: Option<O>,
    /// The attempt changed a path the engine protects (judged with the
    /// receipt when the task is judged by it alone).
    pub protected_changed: bool,
    /// The engine's deadline killed an external-effect command part-way.
    pub timed_out_unsafe: bool,
}

/// The receipt's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement<Q, S, O> {
    /// A question for a person: the task waits `awaiting_input`.
    AwaitingInput(Q),
    /// Refused for want of a scope: failed, the task waits for a login.
    AwaitsLogin(S),
    /// Judged by its receipt alone, and it holds: succeeded.
    Succeeded(O),
    /// Its validations (or the goal's checks) judge it next.
    Validate,
    /// Nobody can tell whether the effect happened: `effect_unknown`.
    Unknown,
    /// Failed, to be classified from its evidence.
    Failed,
}

/// The receipt's verdict: a person's question first, then a refusal for
/// scope, then success (unless a task judged by its receipt alone changed
/// a protected path), then an external command the deadline cut part-way
/// (unknown: a crash must not leave it looking like an ordinary receipt),
/// else a failure.
pub fn judge<Q, S, O>(f: Facts<Q, S, O>) -> Judgement<Q, S, O> {
    if let Some(q) = f.question {
        return Judgement::AwaitingInput(q);
    }
    if let Some(s) = f.step_up_scope {
        return Judgement::AwaitsLogin(s);
    }
    if f.ok {
        match f.unchecked {
            None => return Judgement::Validate,
            Some(o) if !f.protected_changed => return Judgement::Succeeded(o),
            Some(_) => {}
        }
    }
    if f.timed_out_unsafe {
        return Judgement::Unknown;
    }
    Judgement::Failed
}

#[cfg(test)]
mod tests {
    use super::*;

    type F = Facts<&'static str, &'static str, ()>;

    fn ok() -> F {
        Facts {
            question: None,
            step_up_scope: None,
            ok: true,
            unchecked: None,
            protected_changed: false,
            timed_out_unsafe: false,
        }
    }

    #[test]
    fn a_question_for_a_person_comes_before_anything_else() {
        let f = Facts { question: Some("q"), step_up_scope: Some("repo"), timed_out_unsafe: true, ..ok() };
        assert_eq!(judge(f), Judgement::AwaitingInput("q"));
        assert_eq!(judge(Facts { step_up_scope: Some("repo"), ok: false, ..ok() }), Judgement::AwaitsLogin("repo"));
    }

    #[test]
    fn a_good_answer_is_validated_or_succeeds_by_its_receipt_alone() {
        assert_eq!(judge(ok()), Judgement::Validate);
        // Protected paths are judged with the receipt only for a task judged by it.
        assert_eq!(judge(Facts { protected_changed: true, ..ok() }), Judgement::Validate);
        assert_eq!(judge(Facts { unchecked: Some(()), ..ok() }), Judgement::Succeeded(()));
        let broke = Facts { unchecked: Some(()), protected_changed: true, ..ok() };
        assert_eq!(judge(broke), Judgement::Failed);
    }

    #[test]
    fn an_external_command_cut_by_the_deadline_is_unknown_never_failed() {
        assert_eq!(judge(Facts { ok: false, timed_out_unsafe: true, ..ok() }), Judgement::Unknown);
        let broke = Facts { unchecked: Some(()), protected_changed: true, timed_out_unsafe: true, ..ok() };
        assert_eq!(judge(broke), Judgement::Unknown);
        assert_eq!(judge(Facts { ok: false, ..ok() }), Judgement::Failed);
    }
}
