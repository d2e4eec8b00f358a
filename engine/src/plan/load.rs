//! Reading a plan file: bytes → UTF-8 → JSON → typed `PlanFile`, with every
//! error pointing at the exact place (file, line and column, or JSON path).

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Code, Error, Result};
use crate::plan::model::PlanFile;

pub use crate::limits::PLAN_BYTES_MAX;

/// Read a plan file: a regular file (a FIFO or a device is refused, never
/// read: `/dev/zero` never ends, a FIFO blocks), of at most
/// `PLAN_BYTES_MAX` bytes counted while reading — the size field is not
/// trusted (a `/proc` file says 0 and holds more).
pub fn read_plan_bytes(path: &Path) -> Result<Vec<u8>> {
    let refuse = |message: String| Error::new(Code::PlanInvalid, message).at(path.display().to_string());
    let meta = std::fs::metadata(path).map_err(|e| refuse(format!("cannot read plan file: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(refuse(format!("plan file is {}, not a regular file", kind_name(meta.file_type()))));
    }
    if meta.len() > PLAN_BYTES_MAX {
        return Err(refuse(format!("plan file is {} bytes; the limit is {PLAN_BYTES_MAX}", meta.len())));
    }
    // O_NONBLOCK: should the path be swapped for a FIFO after the check
    // above, opening it does not wait for a writer; the check is repeated
    // on what was opened.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refuse(format!("cannot read plan file: {e}")))?;
    let kind = file.metadata().map_err(|e| refuse(format!("cannot read plan file: {e}")))?.file_type();
    if !kind.is_file() {
        return Err(refuse(format!("plan file is {}, not a regular file", kind_name(kind))));
    }
    read_bounded(file, meta.len(), PLAN_BYTES_MAX).map_err(|e| match e {
        Bounded::Over => refuse(format!("plan file is over the limit of {PLAN_BYTES_MAX} bytes")),
        Bounded::Io(e) => refuse(format!("cannot read plan file: {e}")),
    })
}

#[derive(Debug)]
enum Bounded {
    Over,
    Io(std::io::Error),
}

/// Read to EOF, but never more than `max + 1` bytes: one byte past the
/// bound is enough to know it was passed. `expected` (the size the file
/// said) sizes the buffer, so a large plan is not read into a buffer
/// doubled as it grew; it is a hint only.
fn read_bounded(r: impl Read, expected: u64, max: u64) -> std::result::Result<Vec<u8>, Bounded> {
    let mut bytes = Vec::with_capacity(expected.min(max) as usize + 1);
    r.take(max + 1).read_to_end(&mut bytes).map_err(Bounded::Io)?;
    if bytes.len() as u64 > max {
        return Err(Bounded::Over);
    }
    Ok(bytes)
}

fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Parse plan bytes. `file` names the source in error places.
pub fn parse_plan(bytes: &[u8], file: &str) -> Result<PlanFile> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(Error::new(
            Code::PlanInvalid,
            format!("plan file is not valid UTF-8 (first bad byte at offset {})", e.valid_up_to()),
        )
        .at(file.to_string()));
    }
    // The plain parse first: tracking the JSON path of every value costs
    // as much as the parse itself, and only an error needs its place.
    if let Ok(mut plan) = serde_json::from_slice::<PlanFile>(bytes) {
        // The list grew by doubling: up to half of it is room never used.
        plan.tasks.shrink_to_fit();
        return Ok(plan);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let plan: PlanFile = match serde_path_to_error::deserialize(&mut de) {
        Ok(plan) => plan,
        Err(e) => {
            let path = json_path(e.path());
            let inner = e.into_inner();
            let message = strip_position(&inner.to_string());
            if inner.is_syntax() || inner.is_eof() {
                return Err(syntax_error(bytes, file, message, inner.line(), inner.column()));
            }
            let place = unknown_field_place(path, &inner.to_string());
            let message = format!("{message}{}", unknown_field_hint(&message));
            return Err(Error::new(Code::PlanInvalid, message).at(place));
        }
    };
    // Trailing garbage after the document is an error too.
    de.end().map_err(|e| syntax_error(bytes, file, strip_position(&e.to_string()), e.line(), e.column()))?;
    let mut plan = plan;
    plan.tasks.shrink_to_fit();
    Ok(plan)
}

/// How many characters of the source line are shown on each side of the
/// column of a syntax error.
const SOURCE_WINDOW_CHARS: usize = 60;

/// A JSON syntax error at `file:line:column`, with the source line around
/// the column in `details` (`line`, `column`, `source`: `text`, `caret`
/// and whether it was cut before or after) for a person to see where.
fn syntax_error(bytes: &[u8], file: &str, message: String, line: usize, column: usize) -> Error {
    let source = source_window(bytes, line, column);
    Error::new(Code::PlanInvalid, message)
        .at(format!("{file}:{line}:{column}"))
        .with_details(serde_json::json!({"line": line, "column": column, "source": source}))
}

/// Line `line` (1-based) of `bytes`, cut to `SOURCE_WINDOW_CHARS` on each
/// side of byte column `column` (1-based, as serde_json counts), and where
/// in it the column falls (in characters). `None` when there is no such
/// line (an error at the end of the input).
fn source_window(bytes: &[u8], line: usize, column: usize) -> Option<serde_json::Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let l = text.split('\n').nth(line.checked_sub(1)?)?;
    let l = l.strip_suffix('\r').unwrap_or(l);
    let mut at = column.saturating_sub(1).min(l.len());
    while !l.is_char_boundary(at) {
        at -= 1;
    }
    // The whole line when it fits; else a window of that width around
    // the column (moved inward at either end of the line).
    let (caret, count) = (l[..at].chars().count(), l.chars().count());
    let width = 2 * SOURCE_WINDOW_CHARS;
    let start = caret.saturating_sub(SOURCE_WINDOW_CHARS).min(count.saturating_sub(width));
    let text: String = l.chars().skip(start).take(width).collect();
    Some(serde_json::json!({
        "text": text,
        "caret": caret - start,
        "cut_before": start > 0,
        "cut_after": start + width < count,
    }))
}

/// `serde_path_to_error` prints `tasks[0].action`; we print `$.tasks[0].action`.
fn json_path(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." || s.is_empty() {
        "$".to_string()
    } else {
        format!("$.{s}")
    }
}

/// Inside an internally tagged enum (`providers.NAME`, tagged by `kind`)
/// serde buffers the object, so the tracked path stops at the enum and an
/// unknown field there would be placed at `$.providers.NAME`. serde's message
/// names the field (`unknown field `x`, expected ...`): finish the path.
fn unknown_field_place(path: String, msg: &str) -> String {
    let Some(field) = msg.strip_prefix("unknown field `").and_then(|rest| rest.split('`').next()) else {
        return path;
    };
    if path.ends_with(&format!(".{field}")) {
        path
    } else {
        format!("{path}.{field}")
    }
}

/// "did you mean" for an unknown field, from the fields serde expected.
fn unknown_field_hint(msg: &str) -> String {
    let Some(field) = msg.strip_prefix("unknown field `").and_then(|rest| rest.split('`').next()) else {
        return String::new();
    };
    super::suggest::did_you_mean(field, super::suggest::expected_in_serde_message(msg))
}

/// serde_json appends " at line L column C"; the place already says so.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_names_its_path() {
        let e = parse_plan(br#"{"version":1,"tasks":[{"ref":"a","provider":"p","action":{},"colour":1}]}"#, "p.json")
            .unwrap_err();
        assert_eq!(e.code, Code::PlanInvalid);
        assert_eq!(e.place.as_deref(), Some("$.tasks[0].colour"));
        assert!(e.message.contains("colour"), "{}", e.message);
    }

    #[test]
    fn a_misspelt_field_gets_a_suggestion() {
        let e =
            parse_plan(br#"{"version":1,"tasks":[{"ref":"a","provider":"p","action":{},"efect":"none"}]}"#, "p.json")
                .unwrap_err();
        assert_eq!(e.place.as_deref(), Some("$.tasks[0].efect"));
        assert!(e.message.ends_with("; did you mean `effect`?"), "{}", e.message);
        let e = parse_plan(br#"{"version":1,"tasks":[],"budget":{}}"#, "p.json").unwrap_err();
        assert!(e.message.ends_with("; did you mean `budgets`?"), "{}", e.message);
    }

    #[test]
    fn wrong_type_names_its_path() {
        let e =
            parse_plan(br#"{"version":1,"tasks":[{"ref":"a","provider":"p","action":{},"depends_on":"b"}]}"#, "p.json")
                .unwrap_err();
        assert_eq!(e.place.as_deref(), Some("$.tasks[0].depends_on"));
    }

    #[test]
    fn truncated_json_names_line_and_column() {
        let e = parse_plan(b"{\"version\": 1,\n \"tasks\": [", "p.json").unwrap_err();
        assert_eq!(e.code, Code::PlanInvalid);
        assert_eq!(e.place.as_deref(), Some("p.json:2:11"));
        assert_eq!(e.details["source"]["text"], " \"tasks\": [");
    }

    #[test]
    fn a_syntax_error_keeps_its_source_line_cut_around_the_column() {
        let after_caret = |source: &serde_json::Value| {
            let text = source["text"].as_str().unwrap();
            let caret = source["caret"].as_u64().unwrap() as usize;
            text.chars().skip(caret).collect::<String>()
        };
        let e = parse_plan(b"{\"version\": 1,\n \"goal\": {\"id\": \"\xc3\xa9\" \"x\"}}", "p.json").unwrap_err();
        // serde_json counts the column in bytes (`é` is two); the caret
        // counts characters.
        assert_eq!((e.details["line"].as_u64(), e.details["column"].as_u64()), (Some(2), Some(22)));
        let source = &e.details["source"];
        assert_eq!(source["text"], " \"goal\": {\"id\": \"\u{e9}\" \"x\"}}");
        assert_eq!((source["caret"].as_u64(), after_caret(source).as_str()), (Some(20), "\"x\"}}"));

        let long = format!("{{\"version\": 1, \"goal\": {{\"id\": \"{}\" \"x\": 1}}}}", "w".repeat(1000));
        let e = parse_plan(long.as_bytes(), "p.json").unwrap_err();
        let source = &e.details["source"];
        // Near the end of a long line: the window keeps its width, moved in.
        assert_eq!(source["text"].as_str().unwrap().chars().count(), 2 * SOURCE_WINDOW_CHARS);
        assert_eq!((source["cut_before"].as_bool(), source["cut_after"].as_bool()), (Some(true), Some(false)));
        assert_eq!(after_caret(source), "\"x\": 1}}", "{source}");
        // In the middle: cut on both sides, the column in the middle.
        let w = "w".repeat(1000);
        let middle = format!("{{\"version\": 1, \"goal\": {{\"id\": \"{w}\" \"x\": \"{w}\"}}}}");
        let source = &parse_plan(middle.as_bytes(), "p.json").unwrap_err().details["source"];
        assert_eq!(source["caret"].as_u64(), Some(SOURCE_WINDOW_CHARS as u64));
        assert_eq!((source["cut_before"].as_bool(), source["cut_after"].as_bool()), (Some(true), Some(true)));
        assert!(after_caret(source).starts_with("\"x\": \"www"), "{source}");
    }

    #[test]
    fn non_utf8_is_invalid() {
        let e = parse_plan(b"{\"version\": 1, \"x\": \"\xff\"}", "p.json").unwrap_err();
        assert_eq!(e.code, Code::PlanInvalid);
        assert!(e.message.contains("offset 21"), "{}", e.message);
    }

    #[test]
    fn reading_stops_one_byte_past_the_bound() {
        // An endless source (like /dev/zero) is cut at max + 1 bytes.
        assert!(matches!(read_bounded(std::io::repeat(b' '), 0, 1000), Err(Bounded::Over)));
        assert_eq!(read_bounded(&b"{}"[..], 2, 2).unwrap(), b"{}");
        assert!(matches!(read_bounded(&b"{} "[..], 2, 2), Err(Bounded::Over)));
        // The size said is a hint only, too small or too large.
        assert_eq!(read_bounded(&b"{}"[..], 0, 2).unwrap(), b"{}");
        assert!(matches!(read_bounded(std::io::repeat(b' '), 1 << 40, 1000), Err(Bounded::Over)));
    }

    #[test]
    fn trailing_garbage_is_invalid() {
        let e = parse_plan(br#"{"version":1,"tasks":[]} x"#, "p.json").unwrap_err();
        assert_eq!(e.code, Code::PlanInvalid);
    }
}
