//! Issue 15, end to end against real servers: read-back observation with
//! three outcomes (server-filesystem, the receiver), MCP's official
//! conformance kit's client scenarios (`conformance`), one MCP server per
//! provider per run, MCP tasks over stdio and Streamable HTTP with their
//! task id committed before the result and asked about after a crash
//! (server-everything; their edges — a failed task, a deadline — with the
//! project's fixture), HTTPS with and without a `ca_file` (a local TLS
//! server), and the plan fields `engine check` reads through the
//! providers' parsers. Every test judges from what the server really
//! received (a `tee` of its stdin, a tap in front of its port, the
//! receiver's delivery log), never from the engine's word alone.

mod common;
mod conformance;
mod everything;
mod filesystem;
mod fixture_tasks;
mod http_readback;
mod https;
mod input;
mod modern;
mod oauth;
mod plan_check;
mod streams;
mod traces;
