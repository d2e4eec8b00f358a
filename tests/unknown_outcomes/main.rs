//! Issue 3's "Must show": unknown outcomes after crashes and lost answers,
//! settlement, approvals and retries, fencing — asserted from the
//! receiver's own delivery log and from the engine's store.

mod approvals;
mod call_site;
mod conflict;
mod crash_matrix;
mod fencing;
mod kill_outside;
mod lost_answer;
mod mcp;
mod provider_output;
mod rename;
mod restart_observed;
mod retry_read_back;
mod same_request;
mod settle;
mod tool_authority;
mod words;
