//! The ledger on a real PostgreSQL, with several workers: every test
//! starts its own server (`support::postgres`) on a loopback port.

mod common;
mod failures;
mod outputs;
mod store;
mod tls;
mod trust;
mod verify;
mod workers;
