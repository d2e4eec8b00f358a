//! A run while it goes on (issue 12, items 1 and 2): a person's stop
//! signals really sent to the engine process alone, with the providers'
//! own pids checked afterwards, their `setsid` descendants too (issue 24);
//! and what a pipe and a pseudo-terminal show of the run before it ends.

mod common;
mod descendants;
mod progress;
mod pty;
mod signals;
mod terminal;
