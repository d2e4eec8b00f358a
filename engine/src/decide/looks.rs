//! May a look at the workspace stand for a later one? The run looks at
//! the goal's protected paths before and after every attempt; in a chain,
//! the look after one attempt may be the next one's baseline (one look a
//! task instead of two) when nothing can have changed the workspace
//! between them. The driver keeps the look; this decides whether it may.

use crate::plan::ProviderSpec;

/// May any look stand for a later one in a run of these providers? Only
/// when every provider's processes end with their call (a command, a
/// builtin): an MCP server or a remote service may write the workspace
/// between two calls. Listed: what may; anything else may not.
pub fn looks_may_stand<'a>(providers: impl IntoIterator<Item = &'a ProviderSpec>) -> bool {
    providers.into_iter().all(|p| matches!(p, ProviderSpec::Command { .. } | ProviderSpec::Builtin {}))
}

/// Does the look after an attempt stand as the next attempt's baseline?
/// When looks may stand at all (`may_stand`), nothing else of the run was
/// in flight (`alone`), and it saw what the next baseline would: the
/// whole workspace (`whole`) exactly for a task that starts processes
/// (`process`).
pub fn look_stands(may_stand: bool, alone: bool, (process, whole): (bool, bool)) -> bool {
    may_stand && alone && whole == process
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
    fn a_look_stands_alone_and_as_whole_as_the_next_baseline() {
        assert!(look_stands(true, true, (true, true)));
        assert!(look_stands(true, true, (false, false)));
        // Seen whole for a task that starts nothing, or not whole for one
        // that does: not what the next baseline would see.
        assert!(!look_stands(true, true, (false, true)));
        assert!(!look_stands(true, true, (true, false)));
        // Something else of the run in flight, or looks that never stand.
        assert!(!look_stands(true, false, (true, true)));
        assert!(!look_stands(false, true, (true, true)));
    }
}
