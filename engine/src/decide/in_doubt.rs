//! One resolver for an attempt without a receipt — after a restart (the
//! engine stopped between intent and receipt), after a lost answer (the
//! connection broke, or a deadline fired after dispatch), and for an
//! attempt of a revision that has been superseded since. Facts in: the
//! situation, the task's effect and idempotence, what re-observing the
//! target found; the resolution out. Observation always comes first: a
//! present effect is the receipt; nothing is ever re-sent blindly.
//!
//! | situation  | observed present | observed absent          | inconclusive, or cannot observe |
//! |------------|------------------|--------------------------|---------------------------------|
//! | restarted  | receipt, judged  | safe: abandoned, re-run; else failed | safe: abandoned, re-run; else unknown |
//! | lost       | receipt, judged  | failed (retryable)       | safe: failed with marker; else unknown |
//! | superseded | receipt (kept)   | failed                   | effect `none`: abandoned; else unknown |
//!
//! "Safe" is SPEC's rule: the effect is `none` or the task is idempotent. A
//! superseded revision never runs again, so only an effect of `none` lets
//! its attempt go without a person.

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

/// What re-observing the target found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
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
        (Situation::Superseded, Present) => Receipt { validate: false },
        (_, Present) => Receipt { validate: true },
        (Situation::Restarted, _) if safe => Abandoned { rerun: true, marker: false },
        (_, Absent) => Failed { marker: false },
        (Situation::AnswerLost, _) if safe => Failed { marker: true },
        (Situation::Superseded, _) if f.effect == Effect::None => Abandoned { rerun: false, marker: true },
        _ => Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EFFECTS: [Effect; 3] = [Effect::None, Effect::Local, Effect::External];
    const OBSERVED: [Observed; 4] =
        [Observed::Present, Observed::Absent, Observed::Inconclusive, Observed::NotObservable];

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
}
