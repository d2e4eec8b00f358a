//! Helpers shared by the crash sweep (`tests/crash_sweep/`) and the soak
//! (`tests/soak/`): the reference plans of `fixtures/reference/` set up in a
//! workspace, the engine started with a crash armed or a kill timed, a
//! person who acts until the goal ends, and the checks made from the
//! fixtures' own delivery logs.
//!
//! A test binary includes it with `#[path = "../support/mod.rs"] mod support;`
//! next to `#[path = "../unknown_outcomes/common.rs"] mod common;`, whose
//! workspace (`Ws`), receiver and output (`Out`) types it reuses.

#![allow(dead_code)]

pub mod checks;
pub mod engine;
pub mod person;
pub mod reference;
pub mod rng;
