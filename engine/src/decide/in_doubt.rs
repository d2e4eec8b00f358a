//! One resolver for an attempt without a receipt — after a restart (the
//! engine stopped between intent and receipt), after a lost answer (the
//! connection broke, or a deadline fired after dispatch), and for an
//! attempt of a revision that has been superseded since. Facts in: the
//! situation, the task's effect and idempotence, what looking found; the
//! resolution out. Looking always comes first: the provider's own answer,
//! fetched by the handle it gave the request (an MCP task id), is the
//! receipt; a present effect read back is the receipt; nothing is ever
//! re-sent blindly.
//!
//! | situation  | answered by handle | observed present | observed absent | inconclusive, or cannot observe |
//! |------------|--------------------|------------------|-----------------|---------------------------------|
//! | restarted  | its answer, judged | receipt, judged  | safe: abandoned, re-run; else failed | safe: abandoned, re-run; else unknown |
//! | lost       | its answer, judged | receipt, judged  | failed (retryable) | safe: failed with marker; else unknown |
//! | superseded | its answer (kept)  | receipt (kept)   | failed          | effect `none`: abandoned; else unknown |
//!
//! What looking found (`looked`): the handle first — an answer settles it;
//! a request the provider still works on makes an observed absence
//! inconclusive (the effect may yet come); a handle the provider does not
//! know leaves it to the read-back rule. The read-back has three outcomes:
//! present only when `present_if` matched, absent only when `absent_if`
//! matched, inconclusive otherwise.
//!
//! "Safe" is SPEC's rule: the effect is `none` or the task is idempotent. A
//! superseded revision never runs again, so only an effect of `none` lets
//! its attempt go without a person.

use providers::Verdict;

use crate::evidence::HandleFound;
use crate::plan::model::Effect;

/// Where the missing receipt was noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Situation {
    /// On start: the engine stopped while the attempt was in flight.
    Restarted,
    /// While running: the answer was lost after dispatch.
    AnswerLost,
    /// On start: the attempt belongs to a revision no longer active.
    Superseded,
}

/// What looking at the target found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The provider's own answer, fetched by the request's handle.
    Answered,
    Present,
    Absent,
    Inconclusive,
    /// The provider cannot observe (or the task is gone from its plan).
    NotObservable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub situation: Situation,
    pub effect: Effect,
    pub idempotent: bool,
    pub observed: Observed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The provider's own answer arrived after all: record it as the
    /// receipt and judge it like any answer (`validate`: its revision
    /// still runs).
    Answer { validate: bool },
    /// The target shows the effect: the observation is the receipt.
    /// `validate`: judge it now (its revision still runs).
    Receipt { validate: bool },
    /// Failed, classified from the evidence. `marker`: record that the
    /// answer was lost (safe to re-send) beside the observation.
    Failed { marker: bool },
    /// Given up for a new try (`rerun`: the task runs again now).
    /// `marker`: record the missing receipt as evidence.
    Abandoned { rerun: bool, marker: bool },
    /// Nobody can tell: `effect_unknown`, for a person to settle.
    Unknown,
}

impl Resolution {
    /// Is re-sending without a person safe (the effect marker's word)?
    pub fn safe_to_resend(self) -> bool {
        self != Resolution::Unknown
    }
}

pub fn resolve(f: Facts) -> Resolution {
    use Observed::*;
    use Resolution::*;
    let safe = f.effect == Effect::None || f.idempotent;
    match (f.situation, f.observed) {
        (Situation::Superseded, Answered) => Answer { validate: false },
        (_, Answered) => Answer { validate: true },
        (Situation::Superseded, Present) => Receipt { validate: false },
        (_, Present) => Receipt { validate: true },
        (Situation::Restarted, _) if safe => Abandoned { rerun: true, marker: false },
        (_, Absent) => Failed { marker: false },
        (Situation::AnswerLost, _) if safe => Failed { marker: true },
        (Situation::Superseded, _) if f.effect == Effect::None => Abandoned { rerun: false, marker: true },
        _ => Unknown,
    }
}

/// What looking found, from the handle's lookup (if the attempt holds
/// one) and the read-back (if a rule applies), in the order the engine
/// looks.
pub fn looked(by_handle: Option<HandleFound>, read_back: Option<Verdict>) -> Observed {
    match (by_handle, read_back) {
        (Some(HandleFound::Answered), _) => Observed::Answered,
        (_, Some(Verdict::Present)) => Observed::Present,
        // Still working: what is not there yet may still come.
        (Some(HandleFound::Running), Some(Verdict::Absent)) => Observed::Inconclusive,
        (_, Some(Verdict::Absent)) => Observed::Absent,
        (_, Some(Verdict::Inconclusive)) | (Some(_), None) => Observed::Inconclusive,
        (None, None) => Observed::NotObservable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EFFECTS: [Effect; 3] = [Effect::None, Effect::Local, Effect::External];
    const OBSERVED: [Observed; 5] =
        [Observed::Answered, Observed::Present, Observed::Absent, Observed::Inconclusive, Observed::NotObservable];

    fn r(situation: Situation, effect: Effect, idempotent: bool, observed: Observed) -> Resolution {
        resolve(Facts { situation, effect, idempotent, observed })
    }

    /// The crash matrix (`tests/unknown_outcomes/crash_matrix.rs`) as a
    /// truth table: an engine killed between intent and receipt, restarted,
    /// for every effect, with and without an observation.
    #[test]
    fn restart_truth_table() {
        use Resolution::*;
        for effect in EFFECTS {
            for idempotent in [false, true] {
                let safe = effect == Effect::None || idempotent;
                for observed in OBSERVED {
                    let want = match observed {
                        Observed::Answered => Answer { validate: true },
                        Observed::Present => Receipt { validate: true },
                        _ if safe => Abandoned { rerun: true, marker: false },
                        Observed::Absent => Failed { marker: false },
                        _ => Unknown,
                    };
                    assert_eq!(
                        r(Situation::Restarted, effect, idempotent, observed),
                        want,
                        "{effect:?} {idempotent} {observed:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn lost_answer_truth_table() {
        use Resolution::*;
        for effect in EFFECTS {
            for idempotent in [false, true] {
                let safe = effect == Effect::None || idempotent;
                for observed in OBSERVED {
                    let want = match observed {
                        Observed::Answered => Answer { validate: true },
                        Observed::Present => Receipt { validate: true },
                        Observed::Absent => Failed { marker: false },
                        _ if safe => Failed { marker: true },
                        _ => Unknown,
                    };
                    assert_eq!(
                        r(Situation::AnswerLost, effect, idempotent, observed),
                        want,
                        "{effect:?} {idempotent} {observed:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn superseded_truth_table() {
        use Resolution::*;
        for effect in EFFECTS {
            for idempotent in [false, true] {
                for observed in OBSERVED {
                    let want = match observed {
                        Observed::Answered => Answer { validate: false },
                        Observed::Present => Receipt { validate: false },
                        Observed::Absent => Failed { marker: false },
                        // Idempotence does not help: its revision never runs again.
                        _ if effect == Effect::None => Abandoned { rerun: false, marker: true },
                        _ => Unknown,
                    };
                    assert_eq!(
                        r(Situation::Superseded, effect, idempotent, observed),
                        want,
                        "{effect:?} {idempotent} {observed:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_unsafe_effect_nobody_can_observe_is_never_given_up_or_resent() {
        for situation in [Situation::Restarted, Situation::AnswerLost, Situation::Superseded] {
            for effect in [Effect::Local, Effect::External] {
                for observed in [Observed::Inconclusive, Observed::NotObservable] {
                    let res = r(situation, effect, false, observed);
                    assert_eq!(res, Resolution::Unknown, "{situation:?} {effect:?} {observed:?}");
                    assert!(!res.safe_to_resend());
                }
            }
        }
    }

    /// Every combination of a handle's lookup and a read-back verdict.
    #[test]
    fn looking_combines_the_handle_and_the_read_back() {
        use HandleFound::*;
        use Verdict::*;
        let handles = [None, Some(Answered), Some(Running), Some(Unknown)];
        let reads = [None, Some(Present), Some(Absent), Some(Inconclusive)];
        for h in handles {
            for r in reads {
                let want = match (h, r) {
                    (Some(Answered), _) => Observed::Answered,
                    (_, Some(Present)) => Observed::Present,
                    (Some(Running), Some(Absent)) => Observed::Inconclusive,
                    (_, Some(Absent)) => Observed::Absent,
                    (None, None) => Observed::NotObservable,
                    _ => Observed::Inconclusive,
                };
                assert_eq!(looked(h, r), want, "{h:?} {r:?}");
            }
        }
        // Absence is only ever what a rule declared: no rule, no absence.
        for h in handles {
            assert_ne!(looked(h, None), Observed::Absent);
            assert_ne!(looked(h, Some(Inconclusive)), Observed::Absent);
        }
    }
}
