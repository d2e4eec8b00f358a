//! Every suite of tests/ that drives the built `engine` binary, in one
//! test binary: compiled and linked once, its tests run side by side.
//! Each folder keeps its own `main.rs` as its module root (a new test
//! module is a `mod` line there, not here), and inside a suite its own
//! modules are `super::name`; `crate::` names what the suites share,
//! declared here. Run part of it by path:
//! `cargo test -p engine-suite --test suite e2e::stores::`. The engine
//! binary it runs is built (when not fresh) by `engine_suite::engine_binary`
//! (`lib.rs`, this package's library).
//!
//! The simulator (`tests/simulation/`) is not here: it is a test of its
//! own package (`simulator/`, `engine-simulator`), built in the same
//! `cargo test --workspace`.

/// The one test harness (`tests/support/`).
#[path = "../support/mod.rs"]
mod support;

/// The receiver fixture and the HTTP and MCP plan helpers
/// (`tests/unknown_outcomes/common.rs`).
#[path = "../unknown_outcomes/common.rs"]
mod common;

/// Plans of command tasks that log their calls
/// (`tests/recovery_and_reuse/helpers.rs`).
#[path = "../recovery_and_reuse/helpers.rs"]
mod helpers;

#[path = "../crash_sweep/main.rs"]
mod crash_sweep;
#[path = "../e2e/main.rs"]
mod e2e;
#[path = "../fuzz/main.rs"]
mod fuzz;
#[path = "../live_run/main.rs"]
mod live_run;
#[path = "../observation/main.rs"]
mod observation;
#[path = "../postgres/main.rs"]
mod postgres;
#[path = "../recovery_and_reuse/main.rs"]
mod recovery_and_reuse;
#[path = "../report/main.rs"]
mod report;
#[path = "../soak/main.rs"]
mod soak;
#[path = "../trust/main.rs"]
mod trust;
#[path = "../unknown_outcomes/main.rs"]
mod unknown_outcomes;
