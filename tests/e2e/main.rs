//! End-to-end tests of the real `engine` binary. One module per area; keep
//! this file a plain list of modules.

mod advice;
mod agent_output;
mod architecture;
mod builtin;
mod commands;
mod common;
mod core;
mod corruption;
mod demo;
mod docs;
mod dry_run;
mod durability;
mod first_hour;
mod human_words;
mod limits;
mod odd_paths;
mod orphans;
/// The receiver fixture and unknown-outcome helpers, shared with that suite.
use crate::common as outcomes;
mod outputs;
mod plan_props;
mod readme_tour;
mod schema;
mod sharp_edges;
mod store_columns;
mod store_creation;
mod store_files;
mod store_full;
mod store_identity;
mod store_open;
mod store_wal;
mod stores;
mod terminal;
mod tested_binary;
