//! What a provider call becomes when a person stops the run (SIGINT,
//! SIGTERM, SIGHUP) while it is in flight and its provider gave no answer
//! of its own: its process group was ended, or the engine stopped waiting.
//!
//! | reached        | observed present | effect `none`/`local`, or idempotent | observed absent | else      |
//! |----------------|------------------|--------------------------------------|-----------------|-----------|
//! | not dispatched | cancelled        | cancelled                            | cancelled       | cancelled |
//! | dispatched     | receipt, kept    | cancelled                            | cancelled       | unknown   |
//!
//! A cancelled call is not a failure: its task runs again on the next
//! plain run (where the call-site gate still asks for an approval before a
//! repeat of paid or external work). An `external` call whose request may
//! have left is observed first where the provider can; otherwise it is
//! `effect_unknown`, as any answer lost after dispatch: a person settles
//! it, and nothing is re-sent on the engine's own word. A call whose
//! provider answered on its own is not stopped: its receipt is recorded
//! and judged (by the next run, when the stop came before its validations).

use super::in_doubt::Observed;
use crate::plan::model::Effect;

/// How far the call got before the person stopped it (`Reached::of`: by
/// the ledger's `dispatched` and by what the provider answered the stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    /// Its intent is recorded; nothing was handed to the provider.
    NotDispatched,
    /// Handed over (a process started, a request written).
    Dispatched,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `cancelled`: the effect is one a new try may repeat, or none left.
    Cancelled,
    /// The target shows the effect: the observation is the receipt, kept
    /// for the next run to judge.
    Receipt,
    /// Nobody can tell: `effect_unknown`, for a person to settle.
    Unknown,
}

impl Reached {
    /// By the ledger and by the provider's answer to the stop: a provider
    /// that answers with a receipt, or says its answer was lost after the
    /// request left, had the request, whether or not its `dispatched` was
    /// recorded before the stop came. Only a call the ledger never saw
    /// dispatched and whose provider said nothing of it, or said it never
    /// went out, counts as not dispatched.
    pub fn of(dispatch_recorded: bool, provider_had_it: bool) -> Reached {
        match dispatch_recorded || provider_had_it {
            true => Reached::Dispatched,
            false => Reached::NotDispatched,
        }
    }
}

/// Must the target be observed before the call is recorded? Only when the
/// answer decides between cancelled and unknown: a dispatched external
/// effect that a new try may not repeat.
pub fn needs_observation(reached: Reached, effect: Effect, idempotent: bool) -> bool {
    reached == Reached::Dispatched && effect == Effect::External && !idempotent
}

pub fn resolve(reached: Reached, effect: Effect, idempotent: bool, observed: Observed) -> Stopped {
    match (reached, observed) {
        (Reached::NotDispatched, _) => Stopped::Cancelled,
        // The provider's own answer came (fetched by its handle), or the
        // effect was read back present: kept as the receipt.
        (_, Observed::Present | Observed::Answered) => Stopped::Receipt,
        _ if effect != Effect::External || idempotent => Stopped::Cancelled,
        (_, Observed::Absent) => Stopped::Cancelled,
        _ => Stopped::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EFFECTS: [Effect; 3] = [Effect::None, Effect::Local, Effect::External];
    const OBSERVED: [Observed; 4] =
        [Observed::Present, Observed::Absent, Observed::Inconclusive, Observed::NotObservable];

    #[test]
    fn a_provider_that_answered_had_the_request_whatever_the_ledger_says() {
        assert_eq!(Reached::of(false, false), Reached::NotDispatched);
        assert_eq!(Reached::of(false, true), Reached::Dispatched);
        assert_eq!(Reached::of(true, false), Reached::Dispatched);
        assert_eq!(Reached::of(true, true), Reached::Dispatched);
        // So an external call answered after a stop is never a plain
        // `cancelled` a next run would send again, unless seen absent.
        let reached = Reached::of(false, true);
        assert!(needs_observation(reached, Effect::External, false));
        assert_eq!(resolve(reached, Effect::External, false, Observed::NotObservable), Stopped::Unknown);
    }

    #[test]
    fn nothing_handed_over_is_always_cancelled() {
        for effect in EFFECTS {
            for idempotent in [false, true] {
                for observed in OBSERVED {
                    assert_eq!(resolve(Reached::NotDispatched, effect, idempotent, observed), Stopped::Cancelled);
                }
                assert!(!needs_observation(Reached::NotDispatched, effect, idempotent));
            }
        }
    }

    #[test]
    fn dispatched_truth_table() {
        for effect in EFFECTS {
            for idempotent in [false, true] {
                let repeatable = effect != Effect::External || idempotent;
                assert_eq!(needs_observation(Reached::Dispatched, effect, idempotent), !repeatable);
                for observed in OBSERVED {
                    let want = match observed {
                        Observed::Present => Stopped::Receipt,
                        _ if repeatable => Stopped::Cancelled,
                        Observed::Absent => Stopped::Cancelled,
                        _ => Stopped::Unknown,
                    };
                    assert_eq!(
                        resolve(Reached::Dispatched, effect, idempotent, observed),
                        want,
                        "{effect:?} {idempotent} {observed:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_dispatched_external_effect_nobody_can_observe_is_never_cancelled() {
        for observed in [Observed::Inconclusive, Observed::NotObservable] {
            assert_eq!(resolve(Reached::Dispatched, Effect::External, false, observed), Stopped::Unknown);
        }
        // Effects a new try may repeat are cancelled without asking.
        assert_eq!(resolve(Reached::Dispatched, Effect::None, false, Observed::NotObservable), Stopped::Cancelled);
        assert_eq!(resolve(Reached::Dispatched, Effect::Local, false, Observed::NotObservable), Stopped::Cancelled);
    }
}
