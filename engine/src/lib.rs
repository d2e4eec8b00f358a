//! `engine`: a goal-aware plan engine for work done by tools and AI agents.
//!
//! Data flows one way: plan file → validated `Plan` → ledger (`store`) →
//! scheduler (`run`) → provider → receipt → validation → classification →
//! ledger. See ARCHITECTURE.md for the map and its invariants.

pub mod approval;
pub mod budget;
pub mod checkpoint;
pub mod classify;
pub mod cli;
pub mod digest;
pub mod error;
pub mod evidence;
pub mod failpoint;
pub mod limits;
pub mod plan;
pub mod repair;
pub mod report;
pub mod reuse;
pub mod revise;
pub mod run;
pub mod settle;
pub mod state;
pub mod store;
pub mod workspace;

pub use error::{Code, Error, Result};
