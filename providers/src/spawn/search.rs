//! Where a program is: `execvp`'s search of `PATH`, remembered.
//!
//! `execvp` tries `dir/prog` for each `PATH` folder in turn; `true` under a
//! long `PATH` cost eight failed `execve`s per process (about 2 µs each on
//! this machine), all made while the engine thread waits for the child's
//! `exec`. So the file that ran is remembered per (`PATH` value, program
//! name) for the rest of the process, and the next child executes it
//! first. When that `execve` fails as a search's would go on past it
//! (`ENOENT`, `EACCES`, `ENOTDIR`, …: the file was removed, made
//! unexecutable, its folder is gone), the child makes the whole search
//! again, exactly as `execvp` would, and what it finds is remembered
//! instead. Like a shell's command hash, a program installed during the
//! run in a folder earlier in `PATH` than the remembered one is not seen
//! until the remembered one stops executing. A name with a `/` is not
//! searched; a file found through a relative `PATH` entry (an empty one is
//! the working folder) is not remembered, as the working folder differs
//! between calls.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

/// How many (PATH, program) pairs are remembered; past it, all are
/// forgotten and the search starts over.
const REMEMBERED_MAX: usize = 256;

/// glibc's default when there is no `PATH` at all.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// The files to try for a program, in order, and the one to try first.
pub(super) struct Program {
    pub candidates: Arc<[CString]>,
    /// The candidate that executed last time.
    pub found: Option<usize>,
    /// The cache's key; `None` for a name with a `/`.
    key: Option<Vec<u8>>,
}

#[derive(Clone)]
struct Remembered {
    candidates: Arc<[CString]>,
    found: Option<usize>,
}

fn cache() -> std::sync::MutexGuard<'static, HashMap<Vec<u8>, Remembered>> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<u8>, Remembered>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner())
}

impl Program {
    /// `prog` looked up under `path` (the child's `PATH`, if it has one).
    pub fn new(prog: &str, path: Option<&[u8]>) -> io::Result<Program> {
        if prog.contains('/') {
            let candidates: Arc<[CString]> = Arc::new([cstring(prog.as_bytes().to_vec())?]);
            return Ok(Program { candidates, found: None, key: None });
        }
        let path = path.unwrap_or(DEFAULT_PATH);
        let key = [path, b"\0", prog.as_bytes()].concat();
        if let Some(r) = cache().get(&key).cloned() {
            return Ok(Program { candidates: r.candidates, found: r.found, key: Some(key) });
        }
        let candidates = candidates(prog, path).into_iter().map(cstring).collect::<io::Result<Arc<[CString]>>>()?;
        Ok(Program { candidates, found: None, key: Some(key) })
    }

    /// Remember which candidate executed (`None`: none did).
    pub fn remember(self, ran: Option<usize>) {
        let Some(key) = self.key else { return };
        let absolute = |i: &usize| self.candidates.get(*i).is_some_and(|c| c.as_bytes().starts_with(b"/"));
        let found = ran.filter(absolute);
        let mut cache = cache();
        if cache.len() >= REMEMBERED_MAX && !cache.contains_key(&key) {
            cache.clear();
        }
        cache.insert(key, Remembered { candidates: self.candidates, found });
    }
}

fn cstring(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
}

/// The files `execvp` tries for a `prog` without a `/`: each `PATH` entry
/// joined with it (an empty entry is the working folder).
fn candidates(prog: &str, path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|&b| b == b':')
        .map(|dir| match dir {
            b"" => prog.as_bytes().to_vec(),
            dir => [dir, b"/", prog.as_bytes()].concat(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &Program) -> Vec<&str> {
        p.candidates.iter().map(|c| c.to_str().unwrap()).collect()
    }

    #[test]
    fn the_candidates_are_execvps() {
        assert_eq!(names(&Program::new("./x", Some(b"/bin")).unwrap()), ["./x"]);
        assert_eq!(names(&Program::new("x", Some(b"/a::/b")).unwrap()), ["/a/x", "x", "/b/x"]);
        assert_eq!(names(&Program::new("x", None).unwrap()), ["/bin/x", "/usr/bin/x"]);
    }

    #[test]
    fn only_an_absolute_file_found_is_remembered() {
        let path = b"/remembered-test-a::/remembered-test-b";
        Program::new("x", Some(path)).unwrap().remember(Some(2));
        let again = Program::new("x", Some(path)).unwrap();
        assert_eq!(again.found, Some(2));
        again.remember(Some(1)); // `x` in the working folder
        assert_eq!(Program::new("x", Some(path)).unwrap().found, None);
        // Another PATH or another name is another search.
        assert_eq!(Program::new("y", Some(path)).unwrap().found, None);
        let slash = Program::new("/remembered-test-a/x", Some(path)).unwrap();
        slash.remember(Some(0));
        assert_eq!(Program::new("/remembered-test-a/x", Some(path)).unwrap().found, None);
    }
}
