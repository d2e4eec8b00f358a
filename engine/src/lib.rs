//! `engine`: a goal-aware plan engine for work done by tools and AI agents.
//!
//! Data flows one way: plan file → validated `Plan` → ledger (`store`) →
//! scheduler (`run`, deciding with `decide`) → provider → receipt →
//! validation → classification → ledger. See ARCHITECTURE.md for the map
//! and its invariants.

pub mod budgets;
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod cost;
pub mod decide;
pub mod digest;
pub mod error;
pub mod evidence;
pub mod failpoint;
pub mod ids;
pub mod init;
pub mod limits;
pub mod once;
pub mod os;
pub mod plan;
pub mod report;
pub mod run;
pub mod signals;
pub mod sim;
pub mod state;
pub mod store;
pub mod trace;
pub mod workspace;

pub use error::{Code, Error, Result};
