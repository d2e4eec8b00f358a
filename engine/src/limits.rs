//! Every limit of the engine, named in one place (TigerBeetle's rule: a
//! limit on everything — every capture, queue, wait and input). Units are
//! in the names. ARCHITECTURE.md lists them, with the providers' own.

use std::time::Duration;

/// Captured output kept per stream (stdout, stderr, an HTTP body, a
/// tool's result); what is cut is recorded as truncated, never silently.
pub const OUTPUT_BYTES_MAX: usize = 1024 * 1024;

/// The excerpt of captured output kept in evidence, beside its blob.
pub const EXCERPT_LINES_MAX: usize = 20;
pub const EXCERPT_BYTES_MAX: usize = 2000;

/// Messages from in-flight work to the run's coordinator waiting to be
/// handled; a sender waits for room (each call sends at most three).
pub const RUN_MESSAGES_MAX: usize = 256;

/// The longest `Retry-After` the engine waits out before a retry; a longer
/// one is refused with the time to come back.
pub const RETRY_AFTER_WAIT_MAX_S: u64 = 300;

/// A file a person hands in with a settlement (`--evidence`).
pub const EVIDENCE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// A check (validation or acceptance) without its own `timeout_seconds`.
pub const CHECK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

/// Events read from the ledger per page by `engine log`.
pub const LOG_PAGE_EVENTS: i64 = 10_000;
