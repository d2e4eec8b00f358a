//! Issue 11, the trust boundary, driven through the real binary: provider
//! processes cannot reach the ledger (sandbox, store place), any store
//! (issue 29), the network or the engine's environment beyond what the
//! plan declares (issue 24), a person's
//! acts can be neither forged (act chain, `STORE_TAMPERED`) nor doubled
//! (`--request-id`, one approval per call), and only the people a plan
//! names may act (`NOT_PERMITTED`).

mod acts;
mod approvals;
mod authority;
mod declared_writes;
mod kernel_writes;
mod network;
mod oauth_tokens;
mod os_users;
mod plan_file;
mod privileges;
mod request_ids;
mod sandbox;
mod shown;
mod store_place;
mod stores;
