//! Issue 4 (failure classification, repair, revise, budgets) and issue 5
//! (reuse across revisions and on plain re-runs), end to end against the
//! real binary, with assertions read from the store and the filesystem.

mod agent_claims;
mod budget_raise;
mod budgets;
mod classify_rules;
mod constraints;
mod controls_expiry;
mod controls_hold;
mod controls_rerun;
mod early_cutoff;
mod money;
mod plan_cache;
mod repair;
mod reuse_property;
mod reuse_refusals;
mod reuse_rerun;
mod revise_verdicts;
mod spending;
mod tool_identity;
mod workspace_outputs;
