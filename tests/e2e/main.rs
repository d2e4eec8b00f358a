//! End-to-end tests of the real `engine` binary. One module per area; keep
//! this file a plain list of modules.

#[path = "../support/mod.rs"]
mod support;

mod agent_output;
mod architecture;
mod commands;
mod common;
mod core;
mod limits;
mod orphans;
mod plan_props;
mod schema;
mod store_files;
mod terminal;
