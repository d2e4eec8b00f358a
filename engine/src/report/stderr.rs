//! Lines for a person on stderr. Not `eprintln!`: it panics when stderr
//! is a pipe whose reader has gone (`engine run plan.json 2>&1 | head -1`),
//! and a note about a run must never end the run that did its work. A
//! line that cannot be written is dropped: there is no one left to tell.

use std::fmt::Arguments;
use std::io::Write;

/// Writes `args` and a newline to stderr, dropping a failed write.
pub fn line(args: Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// Writes `args` to stderr as it is (text that ends its own lines).
pub fn text(args: Arguments<'_>) {
    let _ = write!(std::io::stderr().lock(), "{args}");
}

/// `eprintln!` without the panic: `say_line!("engine: {why}")`.
#[macro_export]
macro_rules! say_line {
    ($($arg:tt)*) => { $crate::report::stderr::line(format_args!($($arg)*)) };
}

/// `eprint!` without the panic.
#[macro_export]
macro_rules! say_text {
    ($($arg:tt)*) => { $crate::report::stderr::text(format_args!($($arg)*)) };
}
