//! ARCHITECTURE.md's invariants that a reading of the source can check.
//! (The behavioural ones — no provider call without a committed intent,
//! approvals consumed at the call site — are end-to-end tests elsewhere.)

use std::fs;
use std::path::{Path, PathBuf};

use super::common::repo_root;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// Files under `dir` whose text contains `needle` (case-insensitive).
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let needle = needle.to_lowercase();
    let root = repo_root();
    let mut hits: Vec<String> = rust_files(dir)
        .into_iter()
        .filter(|p| fs::read_to_string(p).unwrap().to_lowercase().contains(&needle))
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn providers_know_nothing_of_the_ledger() {
    let manifest = fs::read_to_string(repo_root().join("providers/Cargo.toml")).unwrap();
    for dep in ["engine", "rusqlite"] {
        assert!(!manifest.lines().any(|l| l.trim_start().starts_with(dep)), "providers/Cargo.toml depends on {dep}");
    }
    let src = repo_root().join("providers/src");
    assert!(files_containing(&src, "rusqlite").is_empty());
    assert!(files_containing(&src, "engine.db").is_empty());
}

/// Files under `dir` that call `name(` — a method or a function — outside
/// the files that define it (`fn name(` is not a call).
fn callers(dir: &Path, name: &str) -> Vec<String> {
    let call = format!("{name}(");
    let root = repo_root();
    let mut hits: Vec<String> = rust_files(dir)
        .into_iter()
        .filter(|p| {
            let text = fs::read_to_string(p).unwrap();
            text.lines().any(|l| l.contains(&call) && !l.contains(&format!("fn {name}(")))
        })
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn only_the_approve_path_writes_approvals() {
    let src = repo_root().join("engine/src");
    // The SQL is the ledger's own...
    let acts = vec!["engine/src/store/postgres/acts.rs", "engine/src/store/sqlite/acts.rs"];
    assert_eq!(files_containing(&src, "INSERT INTO approvals"), acts);
    assert_eq!(files_containing(&src, "UPDATE approvals"), acts);
    // ...and only `engine approve` asks the ledger to write an approval.
    assert_eq!(callers(&src, "insert_approval"), vec!["engine/src/commands/approve.rs"]);
    // `approve::record` is reached from the CLI's `approve` command only.
    let record: Vec<String> =
        callers(&src, "approve::record").into_iter().filter(|f| f != "engine/src/commands/approve.rs").collect();
    assert_eq!(record, vec!["engine/src/cli/mod.rs"]);
    // Only the call site consumes or voids one.
    assert_eq!(callers(&src, "consume_approval"), vec!["engine/src/run/driver/gate.rs"]);
    assert_eq!(callers(&src, "void_approvals"), vec!["engine/src/run/driver/gate.rs"]);
}

/// Issue 27: only `engine answer` records a person's answer to what an
/// MCP server asked; the run reads answers only from the ledger (the
/// answers a call carries are the ones a person recorded), and a question
/// moves a task only to `awaiting_input`.
#[test]
fn only_the_answer_path_records_answers() {
    let src = repo_root().join("engine/src");
    // An answer is a person's request of kind `answer`: named as a write
    // only where `engine answer` records it (and read where the run, the
    // chain and the simulator's invariant look it up).
    let named: Vec<String> = files_containing(&src, "AskKind::Answer");
    assert_eq!(
        named,
        vec![
            "engine/src/commands/answer.rs",
            "engine/src/commands/held_answer.rs",
            "engine/src/run/held.rs",
            "engine/src/sim/checks/delivery.rs",
            "engine/src/store/acts.rs",
            "engine/src/store/chain/mod.rs"
        ],
        "AskKind::Answer named outside the answer path"
    );
    for reader in ["sim/checks/delivery.rs", "run/held.rs"] {
        let text = std::fs::read_to_string(src.join(reader)).unwrap();
        assert!(!text.contains("insert_ask"), "{reader} only reads answers");
    }
    let record: Vec<String> =
        callers(&src, "answer::record").into_iter().filter(|f| f != "engine/src/commands/answer.rs").collect();
    assert_eq!(record, vec!["engine/src/cli/mod.rs"]);
    // A question a run holds open is answered from another terminal, beside
    // the run's lease: the only write without one's own lease is the run's
    // record of the question, the person's answer and its request id.
    let beside: Vec<String> =
        callers(&src, "write_beside").into_iter().filter(|f| !f.starts_with("engine/src/store/")).collect();
    assert_eq!(
        beside,
        vec!["engine/src/commands/held_answer.rs", "engine/src/once.rs", "engine/src/run/held.rs"],
        "write_beside called outside the held-question path"
    );
    let held: Vec<String> = callers(&src, "held_answer::record");
    assert_eq!(held, vec!["engine/src/cli/mod.rs"]);
    // The run's answers come from the ledger (`answer::in_force`), read by
    // the commands that start a run; nothing in `run/` builds them.
    assert_eq!(
        callers(&src, "answer::in_force"),
        vec![
            "engine/src/commands/rerun.rs",
            "engine/src/commands/retry.rs",
            "engine/src/commands/run.rs",
            "engine/src/commands/worker.rs"
        ]
    );
    assert!(files_containing(&repo_root().join("providers/src"), "AskKind").is_empty());
}

/// Files under `dir` whose code before its unit tests (`#[cfg(test)]
/// mod tests`, a file's last module) contains `needle`: a test's fixture
/// row is not a write path.
fn files_containing_outside_tests(dir: &Path, needle: &str) -> Vec<String> {
    let (needle, root) = (needle.to_lowercase(), repo_root());
    let mut hits: Vec<String> = rust_files(dir)
        .into_iter()
        .filter(|p| {
            let text = fs::read_to_string(p).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            code.to_lowercase().contains(&needle)
        })
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn only_settle_writes_settlements() {
    let src = repo_root().join("engine/src");
    assert_eq!(
        files_containing_outside_tests(&src, "INSERT INTO settlements"),
        vec!["engine/src/store/postgres/acts.rs", "engine/src/store/sqlite/acts.rs"]
    );
    assert_eq!(callers(&src, "insert_settlement"), vec!["engine/src/commands/settle.rs"]);
    assert_eq!(callers(&src, "settle::settle"), vec!["engine/src/cli/mod.rs"]);
}

#[test]
fn sqlite_is_reached_only_through_the_store() {
    // Opening a connection does not happen outside `store/`...
    let src = repo_root().join("engine/src");
    let outside = |hits: Vec<String>| -> Vec<String> {
        hits.into_iter().filter(|f| !f.starts_with("engine/src/store/")).collect()
    };
    assert!(outside(files_containing(&src, "Connection::open")).is_empty(), "SQLite opened outside store/");
    // ...nor does any other use of `rusqlite`, nor any SQL: the rest of the
    // engine reads and writes through the ledger's traits, so another
    // backend can take SQLite's place.
    let rusqlite = outside(files_containing(&src, "rusqlite"));
    assert!(rusqlite.is_empty(), "rusqlite named outside store/: {rusqlite:?}");
    for sql in ["SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "CREATE TABLE", "PRAGMA ", "json_extract"] {
        let hits: Vec<String> = outside(
            rust_files(&src)
                .into_iter()
                .filter(|p| fs::read_to_string(p).unwrap().contains(sql))
                .map(|p| p.strip_prefix(repo_root()).unwrap().display().to_string())
                .collect(),
        );
        assert!(hits.is_empty(), "SQL (`{sql}`) outside store/: {hits:?}");
    }
    // Inside store/, SQL lives in its two implementations only (SQLite,
    // PostgreSQL): the interface (the traits) names no table, and
    // `rusqlite` stays in the SQLite one. Two exceptions, in SQL both
    // backends read alike and naming neither backend's crate: `engine
    // verify`'s checks (`store/verify/`) restate the ledger's invariants
    // once, and the queries both stores run (`store/queries/`) are written
    // once, each store their executor.
    let store = repo_root().join("engine/src/store");
    for f in rust_files(&store) {
        let rel = f.strip_prefix(repo_root()).unwrap().display().to_string();
        if rel.starts_with("engine/src/store/sqlite/") {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap();
        if rel.starts_with("engine/src/store/postgres/") {
            assert!(!text.contains("rusqlite"), "{rel} names rusqlite");
            continue;
        }
        if rel.starts_with("engine/src/store/verify/") || rel.starts_with("engine/src/store/queries/") {
            for backend in ["rusqlite", "tokio_postgres"] {
                assert!(!text.contains(backend), "{rel} names {backend}: the checks are backend-free");
            }
            continue;
        }
        for sql in ["SELECT ", "INSERT INTO", "UPDATE ", "use rusqlite", "rusqlite::"] {
            assert!(!text.contains(sql), "{rel} holds `{sql}`: the interface names no SQL");
        }
    }
}

#[test]
fn the_run_core_does_no_io() {
    // `run/core/` is the run loop as a state machine: events in, actions
    // out. It names no ledger handle, no provider call, no runtime, no
    // thread, no file system, no clock and no signal: the driver does all
    // of that. (It may name the store's record types: they are data.)
    let core = repo_root().join("engine/src/run/core");
    for needle in [
        "LeaseGuard",
        "LedgerTx",
        "LedgerRead",
        "Store::open",
        "store::Store",
        "crate::run::driver",
        "crate::run::live",
        "crate::run::world",
        "crate::commands",
        "crate::checkpoint::observe",
        "crate::clock",
        "crate::signals::",
        "failpoint::hit",
        "tokio",
        "std::fs",
        "std::thread",
        "std::process",
        "std::net",
        "std::time::Instant",
        "SystemTime",
        "providers::Provider",
        "providers::command",
        "providers::http",
        "providers::mcp",
        // The run's trace is fed by the driver; the core never sees it.
        "opentelemetry",
        "crate::trace",
    ] {
        let hits = files_containing(&core, needle);
        assert!(hits.is_empty(), "run/core/ names `{needle}`: {hits:?}");
    }
}

#[test]
fn the_run_flows_one_way() {
    // run/ is three parts, each knowing only the ones below it: the driver
    // steps the core on a world; the worlds (the real one, the
    // simulator's) never reach back into the driver, and the driver works
    // on any world, never the real one by name. (The core's side:
    // `the_run_core_does_no_io`.)
    let run = repo_root().join("engine/src/run");
    let mut below = files_containing(&run.join("live"), "run::driver");
    below.extend(files_containing(&run.join("live"), "super::driver"));
    below.extend(files_containing(&repo_root().join("engine/src/sim"), "run::driver"));
    if fs::read_to_string(run.join("world.rs")).unwrap().contains("driver::") {
        below.push("engine/src/run/world.rs".into());
    }
    assert!(below.is_empty(), "a world names the driver: {below:?}");
    let driver = files_containing(&run.join("driver"), "run::live");
    assert!(driver.is_empty(), "the driver names the real world: {driver:?}");
}

#[test]
fn the_decisions_do_no_io() {
    // `decide/` imports nothing that does I/O: no ledger, no provider call,
    // no runtime, no process, no file system, no clock.
    let decide = repo_root().join("engine/src/decide");
    for needle in [
        "crate::store",
        "crate::run",
        "crate::commands",
        "crate::checkpoint::observe",
        "crate::clock",
        "tokio",
        "std::fs",
        "std::process",
        "std::net",
        "SystemTime",
        "Instant::now",
        "providers::Provider",
        "providers::command",
        "providers::http",
        "providers::mcp",
    ] {
        let hits = files_containing(&decide, needle);
        assert!(hits.is_empty(), "decide/ names `{needle}`: {hits:?}");
    }
}

/// What ARCHITECTURE.md names as a path: every code span holding a `/`
/// (outside fenced blocks, URLs aside) and every link target. Paths are
/// from the repository's root; a module is named with `::`, never a path.
fn paths_named(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    let spans = prose.split('`').skip(1).step_by(2);
    let code = spans.filter(|s| s.contains('/') && !s.contains(char::is_whitespace) && !s.contains("://"));
    let links = prose.split("](").skip(1).filter_map(|rest| rest.split([')', '#']).next());
    code.chain(links).map(|p| p.trim_end_matches('/').to_string()).collect()
}

#[test]
fn every_path_the_map_names_exists() {
    let root = repo_root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let named = paths_named(&text);
    assert!(named.len() > 50, "too few paths read: {named:?}");
    let missing: Vec<&String> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names paths that do not exist: {missing:?}");
    let lines = text.lines().count();
    assert!(lines <= 300, "ARCHITECTURE.md is {lines} lines: a code map of at most 300");
}

#[test]
fn a_path_that_does_not_exist_is_seen() {
    let named = paths_named("see `engine/src/nowhere.rs` and [x](docs/gone.md#a), not `a::b`\n```\n`fenced/x`\n```\n");
    assert_eq!(named, vec!["engine/src/nowhere.rs", "docs/gone.md"]);
}

/// Issue 39: the code keeps its shape. The limits of STYLE.md's charter,
/// counted the way a reader meets them.
const MOST_LINES_A_FILE: usize = 700;
const MOST_LINES_A_FN: usize = 70;

/// Where the shape is kept: engine/src and providers/src, the run core and
/// its driver included.
const SHAPE_KEPT: [&str; 2] = ["engine/src", "providers/src"];

/// The functions allowed over the limit, by file and name: none (issue 39
/// split the last). None goes on; one that comes back is split instead.
const LONG_FNS_LEFT: &[(&str, &str)] = &[];

/// `text` with its comments and the inside of its string and char literals
/// blanked (newlines kept), so that every brace left is code.
fn code_only(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = literal_or_comment_end(text, i);
        if end > i {
            for c in &mut out[i..end] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Where the comment or literal that starts at `i` ends, or `i` for code.
fn literal_or_comment_end(text: &str, i: usize) -> usize {
    let b = text.as_bytes();
    let rest = &b[i..];
    let after_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    let find = |from: usize, what: &str| text[from..].find(what).map_or(b.len(), |at| from + at + what.len());
    if rest.starts_with(b"//") {
        return text[i..].find('\n').map_or(b.len(), |at| i + at);
    }
    if rest.starts_with(b"/*") {
        let (mut depth, mut j) = (0, i);
        while j < b.len() {
            if b[j..].starts_with(b"/*") {
                depth += 1;
                j += 2;
            } else if b[j..].starts_with(b"*/") {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return j;
                }
            } else {
                j += 1;
            }
        }
        return b.len();
    }
    let raw = rest.strip_prefix(b"b").unwrap_or(rest);
    if !after_ident && raw.starts_with(b"r") {
        let hashes = raw[1..].iter().take_while(|&&c| c == b'#').count();
        if raw.get(1 + hashes) == Some(&b'"') {
            let open = i + (rest.len() - raw.len()) + 2 + hashes;
            return find(open, &format!("\"{}", "#".repeat(hashes)));
        }
    }
    if rest.starts_with(b"\"") {
        let mut j = i + 1;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        return (j + 1).min(b.len());
    }
    if rest.starts_with(b"'") {
        if rest.get(1) == Some(&b'\\') {
            return find(i + 3, "'");
        }
        let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
        if b.get(i + 1 + width) == Some(&b'\'') {
            return i + 2 + width;
        }
    }
    i
}

/// The index of the `}` that closes the block opened at `open`.
fn block_end(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        if c == b'{' {
            depth += 1;
        } else if c == b'}' {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return j;
            }
        }
    }
    code.len().saturating_sub(1)
}

/// A file's shape: its lines outside `#[cfg(test)]` modules, and each
/// function outside them with its first line and its length in lines.
fn shape_of(text: &str) -> (usize, Vec<(String, usize, usize)>) {
    let code = code_only(text);
    let line_at = |at: usize| code[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let s = String::from_utf8_lossy(&code).into_owned();
    let mut test_lines = std::collections::BTreeSet::new();
    for (at, _) in s.match_indices("#[cfg(test)]") {
        let after = s[at + 12..].trim_start();
        let item = after.strip_prefix("pub(crate) ").or_else(|| after.strip_prefix("pub ")).unwrap_or(after);
        let head = &after[..after.find(['{', ';']).unwrap_or(after.len())];
        if item.starts_with("mod ") && !head.is_empty() && after.as_bytes().get(head.len()) == Some(&b'{') {
            let open = s.len() - after.len() + head.len();
            test_lines.extend(line_at(at)..=line_at(block_end(&code, open)));
        }
    }
    let lines = text.lines().count() - test_lines.len();
    let mut fns = Vec::new();
    for (at, _) in s.match_indices("fn ") {
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if at > 0 && ident(code[at - 1]) || test_lines.contains(&line_at(at)) {
            continue;
        }
        let name: String = s[at + 3..].trim_start().chars().take_while(|&c| ident(c as u8) && c.is_ascii()).collect();
        if name.is_empty() {
            continue;
        }
        let mut depth = 0i32;
        let body = code[at..].iter().position(|&c| {
            depth += matches!(c, b'(' | b'[') as i32 - matches!(c, b')' | b']') as i32;
            depth == 0 && (c == b'{' || c == b';')
        });
        if let Some(open) = body.map(|p| at + p).filter(|&open| code[open] == b'{') {
            fns.push((name, line_at(at), line_at(block_end(&code, open)) - line_at(at) + 1));
        }
    }
    (lines, fns)
}

#[test]
fn the_code_keeps_its_shape() {
    let root = repo_root();
    let (mut long_files, mut long_fns, mut seen) = (Vec::new(), Vec::new(), Vec::new());
    for dir in SHAPE_KEPT {
        for path in rust_files(&root.join(dir)) {
            let rel = path.strip_prefix(&root).unwrap().display().to_string();
            if path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let (lines, fns) = shape_of(&fs::read_to_string(&path).unwrap());
            if lines > MOST_LINES_A_FILE {
                long_files.push(format!("{rel}: {lines} lines outside its tests (at most {MOST_LINES_A_FILE})"));
            }
            for (name, line, length) in fns.into_iter().filter(|f| f.2 > MOST_LINES_A_FN) {
                if LONG_FNS_LEFT.contains(&(rel.as_str(), name.as_str())) {
                    seen.push((rel.clone(), name));
                } else {
                    long_fns.push(format!("{rel}:{line} fn {name}: {length} lines (at most {MOST_LINES_A_FN})"));
                }
            }
        }
    }
    assert!(long_files.is_empty(), "files over {MOST_LINES_A_FILE} lines: {long_files:#?}");
    assert!(long_fns.is_empty(), "functions over {MOST_LINES_A_FN} lines: {long_fns:#?}");
    let gone: Vec<_> = LONG_FNS_LEFT.iter().filter(|(f, n)| !seen.iter().any(|(sf, sn)| sf == f && sn == n)).collect();
    assert!(gone.is_empty(), "now within {MOST_LINES_A_FN} lines: take them off LONG_FNS_LEFT: {gone:?}");
}

#[test]
fn the_shape_count_sees_through_literals_comments_and_tests() {
    let text = "fn a() {\n    let s = \"}\"; // }\n    let c = '{';\n    /* } */\n}\n\
                fn b<'x>(x: &'x str) -> &'x str {\n    r#\"}\"#;\n    x\n}\n\
                #[cfg(test)]\nmod tests {\n    fn c() {\n    }\n}\n";
    let (lines, fns) = shape_of(text);
    assert_eq!(lines, 9, "the test module's 5 lines are not counted");
    assert_eq!(fns, vec![("a".to_string(), 1, 5), ("b".to_string(), 6, 4)]);
}

/// Every line the engine writes to stderr goes through
/// `report::stderr` (`say_line!`, `say_text!`), which drops a write that
/// fails: `eprintln!` panics when stderr is a pipe whose reader has gone,
/// and would end a run that did its work with exit 101.
#[test]
fn the_engine_writes_stderr_without_a_panic() {
    let root = repo_root();
    let mut offenders: Vec<String> = rust_files(&root.join("engine/src"))
        .into_iter()
        .filter(|p| {
            let code = String::from_utf8(code_only(&fs::read_to_string(p).unwrap())).unwrap();
            code.contains("eprintln!") || code.contains("eprint!")
        })
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    offenders.sort();
    assert!(offenders.is_empty(), "eprintln!/eprint! in {offenders:?}: use say_line!/say_text! (report::stderr)");
}
