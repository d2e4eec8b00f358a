//! A child's environment: the minimal set of the engine's own variables
//! (`sandbox::MINIMAL_ENV`: `PATH`, `HOME`, `LANG`, `TMPDIR`), read once,
//! with the plan's named variables and a call's own set over it. Nothing
//! else of the engine's environment reaches a provider: not its `ENGINE_*`
//! variables (the store's location above all), not an API key the plan does
//! not name (docs/sandbox.md, "Environment").
//!
//! Building it per process from `std::env::vars_os()` (a copy of every
//! variable, a sorted map, a C string each) was about 0.1 M instructions
//! per provider process, a tenth of the engine thread's work for a `true`
//! task (bench/README.md, "The performance log"). The engine never changes
//! its own environment while it runs, so the minimal set is read at the
//! first spawn (never an `ENGINE_*` variable: the store's location above
//! all) and kept as the C strings `execve` takes; a spawn only adds its few
//! variables' strings and one pointer array.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use crate::sandbox::MINIMAL_ENV;

/// A prepared environment: the C strings `NAME=value` a child gets.
pub(super) struct Environ {
    /// The engine's variables not set again by the call (borrowed from the
    /// process-wide copy), then the call's own.
    inherited: &'static [Var],
    own: Vec<CString>,
    /// Which of `inherited` the call sets again (so leaves out).
    replaced: Vec<bool>,
}

/// One inherited variable: `NAME=value` and the length of `NAME`.
struct Var {
    entry: CString,
    name_len: usize,
}

impl Var {
    fn name(&self) -> &[u8] {
        self.entry.as_bytes().get(..self.name_len).unwrap_or_default()
    }
}

/// The engine's environment as every process inherits it: the minimal
/// set's variables the engine has, read at the first spawn of the process.
fn inherited() -> &'static [Var] {
    static VARS: OnceLock<Vec<Var>> = OnceLock::new();
    VARS.get_or_init(|| {
        MINIMAL_ENV
            .iter()
            .filter_map(|name| {
                let value = std::env::var_os(name)?;
                Some(Var { name_len: name.len(), entry: entry(OsStr::new(name), &value).ok()? })
            })
            .collect()
    })
}

fn entry(name: &OsStr, value: &OsStr) -> io::Result<CString> {
    let mut kv = Vec::with_capacity(name.len() + 1 + value.len());
    kv.extend_from_slice(name.as_bytes());
    kv.push(b'=');
    kv.extend_from_slice(value.as_bytes());
    CString::new(kv).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an environment variable"))
}

impl Environ {
    /// The inherited environment with `set` over it, in order (a name set
    /// twice keeps its last value).
    pub fn new(set: &[(OsString, OsString)]) -> io::Result<Environ> {
        let inherited = inherited();
        let mut replaced = vec![false; inherited.len()];
        let mut own = Vec::with_capacity(set.len());
        for (i, (name, value)) in set.iter().enumerate() {
            if set.get(i + 1..).is_some_and(|later| later.iter().any(|(n, _)| n == name)) {
                continue; // set again below
            }
            for (var, replaced) in inherited.iter().zip(replaced.iter_mut()) {
                *replaced |= var.name() == name.as_bytes();
            }
            own.push(entry(name, value)?);
        }
        Ok(Environ { inherited, own, replaced })
    }

    /// The value of `name` the child gets.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        fn value<'e>(entry: &'e CString, name: &[u8]) -> Option<&'e [u8]> {
            entry.as_bytes().strip_prefix(name)?.strip_prefix(b"=")
        }
        let own = self.own.iter().find_map(|e| value(e, name));
        let kept = self.inherited.iter().zip(&self.replaced).filter(|(_, r)| !**r);
        own.or_else(|| kept.map(|(v, _)| v).find_map(|v| value(&v.entry, name)))
    }

    /// `envp` for `execve`: the strings' pointers, then NULL.
    pub fn pointers(&self) -> Vec<*const libc::c_char> {
        let kept = self.inherited.iter().zip(&self.replaced).filter(|(_, r)| !**r).map(|(v, _)| v.entry.as_ptr());
        kept.chain(self.own.iter().map(|e| e.as_ptr())).chain(std::iter::once(std::ptr::null())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(e: &Environ) -> Vec<String> {
        let ptrs = e.pointers();
        assert!(ptrs.last().is_some_and(|p| p.is_null()));
        ptrs.iter()
            .take_while(|p| !p.is_null())
            // SAFETY: each pointer is a C string `e` owns or borrows.
            .map(|&p| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_calls_variables_are_set_over_the_minimal_set_and_nothing_else_is_inherited() {
        std::env::set_var("ENVIRON_TEST_SECRET", "s3cret");
        let path = std::env::var("PATH").unwrap();
        let set: Vec<(OsString, OsString)> =
            [("EXTRA", "1"), ("PATH", "/a"), ("EXTRA", "2")].iter().map(|(k, v)| (k.into(), v.into())).collect();
        let env = Environ::new(&set).unwrap();
        let all = strings(&env);
        assert_eq!(all.iter().filter(|v| v.starts_with("PATH=")).collect::<Vec<_>>(), ["PATH=/a"], "{path}");
        assert_eq!(all.iter().filter(|v| v.starts_with("EXTRA=")).collect::<Vec<_>>(), ["EXTRA=2"]);
        assert_eq!(env.get(b"PATH"), Some(&b"/a"[..]));
        assert_eq!(env.get(b"EXTRA"), Some(&b"2"[..]));
        assert_eq!(env.get(b"ENVIRON_TEST_SECRET"), None, "not in the minimal set, not named");
        assert!(all.iter().all(|v| !v.starts_with("ENGINE_")), "{all:?}");
        // Without the call's own, the minimal set of the engine's.
        let plain = Environ::new(&[]).unwrap();
        assert_eq!(plain.get(b"PATH"), Some(path.as_bytes()));
        let names: Vec<String> = strings(&plain).iter().map(|v| v.split('=').next().unwrap().to_owned()).collect();
        assert!(names.iter().all(|n| MINIMAL_ENV.contains(&n.as_str())), "{names:?}");
        assert_eq!(strings(&plain).len(), all.len() - 1, "EXTRA is the one more");
    }
}
