//! The engine's decisions, as pure functions: facts in, a decision out.
//! Nothing here does I/O — no ledger, no provider call, no clock, no
//! runtime — so each is unit-tested on its own, rule by rule; the run loop
//! (`run/`) gathers the facts, asks, and applies the answer.
//!
//! - `advice`: what a person does next, as the exact commands to type.
//! - `answer`: a person's `--field`s checked against what an MCP server asked.
//! - `gate`: may this call be sent now (plan freshness, an unsettled try,
//!   an operation conflict, budgets, approval)?
//! - `in_doubt`: what becomes of an attempt without a receipt?
//! - `classify`: which failure class does the evidence show?
//! - `constraints`: which protected files did an attempt change that its
//!   task may not, judged against which state?
//! - `tools`: does every MCP tool a task calls exist on its server, and
//!   what of the server's inventory does a task's checkpoint carry?
//! - `verdict`: the goal's state and exit code at the end of a run.
//! - `scheduler`: which ready tasks start next.
//! - `group`: may a message's records share one commit with the intents
//!   that follow (group commit)?
//! - `durability`: which attempts' records are committed `synchronous=FULL`
//!   before the call, and which without waiting for the disk (by effect).
//! - `reuse`: may a completed task's result stand?
//! - `stop`: what a call a person stopped (SIGINT, SIGTERM, SIGHUP) becomes.
//! - `budget`, `retry`, `repair`: a call within budgets; a person's retry
//!   of an operation; a repair that would only repeat.
//! - `people`: may this operating-system user do this person's act?
//! - `expiry`: when a person's approval ends (`--for`, `approvals.expire_after`).
//! - `hold`: which tasks a person holds (`engine hold`, `engine release`).
//! - `request_id`: is a command given under a `--request-id` new, a repeat,
//!   or a conflict?
//! - `spend`: which command spends an approval a person gave.
//! - `raise`: a person's raise of a budget, and the way out of an
//!   exhausted one.
//! - `prune`: may `engine stores --prune` remove a store?
//! - `loosening`: what a new revision loosens (sandbox, network, env,
//!   budgets, constraints, protected paths, `people`, tool allow-lists),
//!   which a person approves.
//! - `shadow`: what an interpreter loads from the working folder in place
//!   of the module a check names (protected with the goal's paths).
//! - `sandbox_rules`: which declared write rules reach a cgroup tree, the
//!   store's folder or the engine's state (refused).
//! - `outputs`: do a task's output files fit their bounds; which upstream
//!   tasks' outputs a task needs; is a file in the workspace the one the
//!   ledger holds.
//! - `looks`: may the look after an attempt stand as the next one's
//!   baseline?
//! - `upstream`: is a completion kept under a dependency that failed
//!   since, or stale under one that runs again (how it is said).

pub mod advice;
pub mod answer;
pub mod budget;
pub mod classify;
pub mod constraints;
pub mod declared;
pub mod durability;
pub mod expiry;
pub mod gate;
pub mod group;
pub mod hold;
pub mod in_doubt;
pub mod looks;
pub mod loosening;
pub mod outputs;
pub mod people;
pub mod prune;
pub mod raise;
pub mod receipt;
pub mod repair;
pub mod request_id;
pub mod retry;
pub mod reuse;
pub mod sandbox_rules;
pub mod scheduler;
pub mod shadow;
pub mod spend;
pub mod stop;
pub mod tools;
pub mod upstream;
pub mod verdict;
pub mod write_grants;
