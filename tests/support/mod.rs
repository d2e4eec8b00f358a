//! The one test harness, shared by every suite of the `engine-suite`
//! package's test binary (`tests/suite/main.rs` declares it once, as
//! `crate::support`): one output type (`Out`), one workspace builder (`Ws`), one
//! way to start the fixtures (the HTTP receiver, a fake HTTP service, the
//! MCP server), and a read view of the ledger through the engine's own
//! store interface (`Ledger`) instead of raw SQL.
//!
//! For the crash sweep, the soak and the fuzzer: the reference plans of
//! `fixtures/reference/` set up in a workspace (`reference`), one engine
//! command with a crash armed or a kill timed (`kill`), a person who acts
//! until the goal ends (`person`), the checks made from the fixtures' own
//! delivery logs (`checks`) and a seeded generator (`rng`).
//!
//! Every test gets its own temp dir (tests run in parallel), and every
//! process a test starts is killed and reaped on drop (a failing test
//! leaves nothing running); every wait has a deadline.

#![allow(dead_code, unused_imports)]

pub mod checks;
pub mod fixtures;
pub mod kill;
pub mod ledger;
pub mod node;
pub mod os_users;
pub mod otlp;
pub mod person;
pub mod places;
pub mod postgres;
pub mod process;
pub mod reference;
pub mod rng;
pub mod traced;
pub mod workspace;

pub use fixtures::{copy_tree, http, mcp_server_command, read_json_lines, repo_root, snapshot, FakeHttp, Receiver};
pub use ledger::{Attempt, Event, Ledger};
pub use process::{gone, sh_quote, wait_for, wait_until, GroupGuard, Out, Running, ENGINE, RUN_DEADLINE};
pub use traced::{strace, traced_run};
pub use workspace::Ws;
