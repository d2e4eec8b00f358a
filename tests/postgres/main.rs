//! The ledger on a real PostgreSQL, with several workers: every test
//! starts its own server (`support::postgres`) on a loopback port.

#[path = "../support/mod.rs"]
mod support;

mod common;
mod failures;
mod outputs;
mod store;
mod tls;
mod trust;
mod verify;
mod workers;
