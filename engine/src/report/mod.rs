//! Rendering for people (text) and scripts (JSON). Reads only; every word
//! printed says no more than the ledger holds (SPEC.md's state table).

pub mod acts;
pub mod explain;
pub mod log;
pub mod plan;
pub mod revise;
pub mod run;
pub mod status;

/// `engine --version`: the package version and the source commit.
pub const VERSION: &str = env!("ENGINE_VERSION_LINE");

/// What a command produced: text for people, JSON for scripts, and the
/// exit code. Each renderer builds its own; the CLI only prints it.
pub struct Output {
    pub text: String,
    pub json: serde_json::Value,
    pub exit_code: i32,
}

/// Write to stdout; a reader that went away (`engine log | head`) is not an
/// error worth a panic: the work is already recorded.
pub fn emit(text: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_ok()
}
