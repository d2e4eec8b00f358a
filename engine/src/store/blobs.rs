//! Content-addressed blobs: captured output and evidence, keyed by BLAKE3.

use rusqlite::{params, Connection};

use crate::digest;
use crate::error::Result;

/// Store `bytes` (idempotent) and return their digest.
pub fn put(conn: &Connection, bytes: &[u8]) -> Result<String> {
    let d = digest::content(bytes);
    crate::store::exec(
        conn,
        "INSERT OR IGNORE INTO blobs (digest, size, data) VALUES (?1, ?2, ?3)",
        params![d, bytes.len() as i64, bytes],
    )?;
    Ok(d)
}
