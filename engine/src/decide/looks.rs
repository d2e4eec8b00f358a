//! May a look at the workspace stand for a later one? The run looks at
//! the goal's protected paths (and, for a task that starts processes, the
//! whole workspace) before and after every attempt; a look may stand as a
//! later attempt's baseline (one look a task instead of two) when every
//! process that may have written the workspace since it belongs to an
//! attempt still in flight when the later one starts. Such an attempt is
//! beside the later one (neither upstream of it, which would be complete,
//! nor downstream, which could not have started): what it writes in the
//! window counts as it would after the later attempt's start, and it is
//! judged by its own look after it. The driver keeps the look; this
//! decides whether it may.

use crate::ids::AttemptId;
use crate::plan::ProviderSpec;

/// May any look stand for a later one in a run of these providers? Only
/// when every provider's processes end with their call (a command, a
/// builtin): an MCP server or a remote service may write the workspace
/// between two calls. Listed: what may; anything else may not.
pub fn looks_may_stand<'a>(providers: impl IntoIterator<Item = &'a ProviderSpec>) -> bool {
    providers.into_iter().all(|p| matches!(p, ProviderSpec::Command { .. } | ProviderSpec::Builtin {}))
}

/// Is a look worth keeping as a later baseline? When looks may stand at
/// all (`may_stand`) and it saw what a baseline would: the whole workspace
/// (`whole`) exactly for a task that starts processes (`process`).
pub fn look_stands(may_stand: bool, (process, whole): (bool, bool)) -> bool {
    may_stand && whole == process
}

/// Does a kept look stand as the baseline of an attempt starting now?
/// When every attempt whose processes may have written since it
/// (`running`: those whose call was out at the look and those sent since;
/// the driver forgets the look at anything else that runs or writes, and
/// keeps none taken while checks run) is still in flight (`in_flight`). One that ended without a later look (stopped,
/// not sent, lost) may have written unjudged: the look does not stand.
pub fn stands(running: &[AttemptId], in_flight: &[AttemptId]) -> bool {
    running.iter().all(|id| in_flight.contains(id))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn provider(spec: serde_json::Value) -> ProviderSpec {
        serde_json::from_value(spec).expect("a provider")
    }

    #[test]
    fn looks_stand_only_where_every_process_ends_with_its_call() {
        let command = provider(json!({"kind": "command"}));
        let builtin = provider(json!({"kind": "builtin"}));
        let http = provider(json!({"kind": "http", "endpoint": "http://127.0.0.1:9/"}));
        assert!(looks_may_stand([&command, &builtin]));
        assert!(looks_may_stand([]));
        assert!(!looks_may_stand([&command, &http]));
    }

    #[test]
    fn a_look_is_kept_when_as_whole_as_the_next_baseline() {
        assert!(look_stands(true, (true, true)));
        assert!(look_stands(true, (false, false)));
        // Seen whole for a task that starts nothing, or not whole for one
        // that does: not what the next baseline would see.
        assert!(!look_stands(true, (false, true)));
        assert!(!look_stands(true, (true, false)));
        // Looks that never stand.
        assert!(!look_stands(false, (true, true)));
    }

    #[test]
    fn a_look_stands_while_everything_running_since_it_is_still_in_flight() {
        let (a, b, c) = (AttemptId(1), AttemptId(2), AttemptId(3));
        assert!(stands(&[], &[]));
        assert!(stands(&[], &[a]), "started after the look: in flight beside the next");
        assert!(stands(&[a], &[a, b]));
        assert!(stands(&[a, b], &[b, a]));
        // `b` ended since the look with no look after it: what it wrote
        // would be charged to the next attempt.
        assert!(!stands(&[a, b], &[a, c]));
        assert!(!stands(&[a], &[]));
    }
}
