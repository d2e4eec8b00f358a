//! `engine report [--goal ID] [--revision N] (--html FILE | --json)`: the
//! report document of a goal's revision, printed as JSON or written as one
//! self-contained HTML page.

use std::io::Write;
use std::path::Path;

use super::document::{self, ReportDocument};
use super::Output;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::store::Store;

pub struct Options<'a> {
    pub goal: Option<&'a str>,
    pub revision: Option<i64>,
    pub html: Option<&'a Path>,
    pub json: bool,
    /// Leave the generation time out, so the same ledger gives the same bytes.
    pub no_timestamp: bool,
}

pub fn run(store: &Store, o: &Options) -> Result<Output> {
    if o.html.is_none() && !o.json {
        return Err(Error::usage(
            "say what to make: --html FILE (a page to open in a browser) or --json (the document)",
        ));
    }
    let generated_at_ms = generation_time(o.no_timestamp, std::env::var("SOURCE_DATE_EPOCH").ok().as_deref())?;
    let doc = document::build(store, &document::Request { goal: o.goal, revision: o.revision, generated_at_ms })?;
    let mut text = String::new();
    if let Some(path) = o.html {
        let page = super::html::render(&doc);
        write_file(path, page.as_bytes())?;
        text = summary_line(&doc, path, page.len());
    }
    let json =
        serde_json::to_value(&doc).map_err(|e| Error::internal(format!("the report does not serialize: {e}")))?;
    Ok(Output { text, json, exit_code: 0 })
}

/// `--no-timestamp`: none; else `SOURCE_DATE_EPOCH` (seconds) when set, as
/// reproducible builds use it; else now.
fn generation_time(no_timestamp: bool, source_date_epoch: Option<&str>) -> Result<Option<i64>> {
    if no_timestamp {
        return Ok(None);
    }
    match source_date_epoch.filter(|s| !s.is_empty()) {
        Some(s) => s.trim().parse::<i64>().ok().and_then(|secs| secs.checked_mul(1000)).map(Some).ok_or_else(|| {
            Error::usage(format!("SOURCE_DATE_EPOCH is `{s}`, not a number of seconds")).at("SOURCE_DATE_EPOCH")
        }),
        None => Ok(Some(now_ms())),
    }
}

fn summary_line(doc: &ReportDocument, path: &Path, bytes: usize) -> String {
    format!(
        "wrote {}: goal {} revision {} ({}, {} waiting on a person), {bytes} bytes; it fetches nothing, open it from disk\n",
        path.display(),
        doc.goal.id,
        doc.revision.number,
        super::count(doc.tasks.len(), "task"),
        doc.waiting.len()
    )
}

/// Write beside the target, then rename: a reader never sees half a page.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let name =
        path.file_name().ok_or_else(|| Error::usage("--html needs a file name").at(path.display().to_string()))?;
    let tmp = path.with_file_name(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::usage(format!("cannot write the report: {e}")).at(path.display().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::generation_time;

    #[test]
    fn generation_time_is_off_fixed_or_now() {
        assert_eq!(generation_time(true, Some("1700000000")).unwrap(), None);
        assert_eq!(generation_time(false, Some("1700000000")).unwrap(), Some(1_700_000_000_000));
        assert!(generation_time(false, None).unwrap().is_some());
        let e = generation_time(false, Some("yesterday")).unwrap_err();
        assert_eq!(e.code, crate::error::Code::UsageError);
    }
}
