//! A run while it goes on (issue 12, items 1 and 2): a person's stop
//! signals really sent to the engine process alone, with the providers'
//! own pids checked afterwards; and what a pipe and a pseudo-terminal show
//! of the run before it ends.

#[path = "../support/mod.rs"]
mod support;

mod common;
mod progress;
mod pty;
mod signals;
mod terminal;
