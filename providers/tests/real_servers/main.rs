//! The providers against real servers: the official MCP servers
//! (`@modelcontextprotocol/server-filesystem` and `server-everything`,
//! pinned in `fixtures/node`, installed by `.ci/install-node-fixtures`),
//! the receiver fixture, and TLS servers with certificates made here.
//!
//! These tests fail, never skip, when Node.js or the packages are missing.

mod everything;
mod filesystem;
mod http_readback;
mod https;
mod support;
