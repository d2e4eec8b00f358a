//! The report document (`engine report --json`): what ran, in what order,
//! how long it took, what failed and why, what was reused, where a person
//! stepped in — built from the ledger by `read`, and derived by pure
//! functions (`timeline`, `waiting`, `words`).

pub mod model;
mod read;
#[cfg(test)]
pub mod testdoc;
pub mod timeline;
pub mod waiting;
pub mod words;

pub use model::*;
pub use read::{build, Request};
