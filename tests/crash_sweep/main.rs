//! Issue 9, "crash at every commit": `ENGINE_CRASH_AFTER_COMMITS`, the
//! sweep that crashes the engine after each commit of every reference
//! plan's session and then acts as a person until the goal ends, and
//! `engine verify`, which the sweep runs at the end of every case.

mod commits;
mod regressions;
mod sweep;
mod verify;
