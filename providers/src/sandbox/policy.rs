//! The policy: which folders a provider process may write, and which paths
//! it must never write. Built (and checked) once per provider; the rules
//! themselves are opened later, by [`Policy::prepare`](super::Policy::prepare).
//!
//! Landlock is an allow-list over file *hierarchies*: a rule on a folder
//! covers everything beneath it, and nothing can be carved back out. So a
//! protected path inside a writable folder cannot be protected at all, and
//! the policy refuses to be built that way rather than pretend.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// Devices and shared-memory folders an ordinary program opens for writing
/// (`> /dev/null`, `os.openpty()`, POSIX semaphores). Missing ones are
/// skipped. `/dev/tty` is deliberately absent: a provider has no business
/// prompting on, or writing to, the person's terminal.
pub const DEVICES: [&str; 8] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/pts", "/dev/shm"];

/// Why a path is writable; named in errors and worth showing in `explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    Workspace,
    Temp,
    Device,
    /// A path the plan declares (`"sandbox": {"write": [...]}`), as written.
    Declared {
        as_written: String,
    },
    /// A path in the workspace that a task's declared `outputs` line needs
    /// (instead of the whole workspace; see `PolicyBuilder::only_beneath`).
    Output {
        output: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Workspace => f.write_str("the workspace"),
            Origin::Temp => f.write_str("the temporary folder"),
            Origin::Device => f.write_str("a device path"),
            Origin::Declared { as_written } => write!(f, "declared as {as_written:?}"),
            Origin::Output { output } => write!(f, "for the declared output {output:?}"),
        }
    }
}

/// One writable path, resolved (symlinks followed) as far as it exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Writable {
    pub path: PathBuf,
    pub origin: Origin,
}

/// Why a policy cannot be built or prepared.
#[derive(Debug)]
pub enum PolicyError {
    /// A protected path is, or lies inside, a writable path (or the other
    /// way round): the sandbox could not keep it read-only.
    Overlap { protected: PathBuf, writable: Writable },
    /// A declared path that is not absolute and not `~`-relative.
    BadPath { as_written: String, reason: &'static str },
    /// A file under a protected folder has another name (a hard link),
    /// possibly in a writable folder where Landlock would allow writing it.
    HardLinked { path: PathBuf, links: u64 },
    /// A path could not be read, created or opened.
    Io { path: PathBuf, error: io::Error },
    /// The `landlock` crate refused to build the ruleset.
    Ruleset { message: String },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Overlap { protected, writable } if protected.starts_with(&writable.path) => write!(
                f,
                "the protected path {} is inside the writable path {} ({}): a sandbox rule on a folder covers \
                 everything beneath it, so it could not be kept read-only; move it outside {}",
                protected.display(),
                writable.path.display(),
                writable.origin,
                writable.path.display()
            ),
            PolicyError::Overlap { protected, writable } => write!(
                f,
                "the writable path {} ({}) is inside the protected path {}: a provider could write there",
                writable.path.display(),
                writable.origin,
                protected.display()
            ),
            PolicyError::BadPath { as_written, reason } => {
                write!(f, "sandbox write path {as_written:?}: {reason}")
            }
            PolicyError::HardLinked { path, links } => write!(
                f,
                "{} has {links} names (hard links); another name may sit where a provider can write, so the \
                 sandbox cannot protect it; remove the other links",
                path.display()
            ),
            PolicyError::Io { path, error } => write!(f, "sandbox: {}: {error}", path.display()),
            PolicyError::Ruleset { message } => write!(f, "sandbox: cannot build the Landlock ruleset: {message}"),
        }
    }
}

impl std::error::Error for PolicyError {}

/// The first writable path that contains, equals or lies inside a protected
/// path. Both sides must already be resolved (see [`resolve`]).
pub(crate) fn overlap<'a>(writable: &'a [Writable], protected: &'a [PathBuf]) -> Option<(&'a PathBuf, &'a Writable)> {
    protected
        .iter()
        .find_map(|p| writable.iter().find(|w| p.starts_with(&w.path) || w.path.starts_with(p)).map(|w| (p, w)))
}

/// A declared path as written in a plan → an absolute path: `~` and `~/…`
/// expand to `home`; anything else must be absolute.
pub(crate) fn expand(as_written: &str, home: Option<&Path>) -> Result<PathBuf, PolicyError> {
    let bad = |reason| PolicyError::BadPath { as_written: as_written.to_owned(), reason };
    let rest = match as_written.strip_prefix('~') {
        None if Path::new(as_written).is_absolute() => return Ok(PathBuf::from(as_written)),
        None => return Err(bad("must be absolute or start with ~/")),
        Some(rest) => rest,
    };
    let home = home.ok_or_else(|| bad("starts with ~ but no home folder is known (HOME is unset)"))?;
    match rest.strip_prefix('/') {
        _ if rest.is_empty() => Ok(home.to_path_buf()),
        Some(below) => Ok(home.join(below)),
        None => Err(bad("~user is not supported; write the absolute path")),
    }
}

/// The path with every symlink resolved as far as it exists; the missing
/// tail is appended with `.` and `..` applied lexically (nothing below a
/// missing folder can be a symlink).
pub(crate) fn resolve(path: &Path) -> Result<PathBuf, PolicyError> {
    let io_error = |error| PolicyError::Io { path: path.to_path_buf(), error };
    let mut existing = path;
    let mut tail = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(mut base) => {
                for part in tail.iter().rev() {
                    match part {
                        Component::ParentDir => {
                            base.pop();
                        }
                        Component::Normal(name) => base.push(name),
                        _ => {}
                    }
                }
                return Ok(base);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (Some(last), Some(parent)) = (existing.components().next_back(), existing.parent()) else {
                    return Err(io_error(e));
                };
                tail.push(last);
                existing = parent;
            }
            Err(e) => return Err(io_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(path: &str) -> Writable {
        Writable { path: PathBuf::from(path), origin: Origin::Workspace }
    }

    #[test]
    fn a_protected_path_inside_or_equal_to_a_writable_one_overlaps() {
        let writable = [w("/home/a/proj"), w("/tmp")];
        for protected in ["/home/a/proj/.engine", "/home/a/proj", "/tmp/x/db", "/home/a"] {
            let p = [PathBuf::from(protected)];
            assert!(overlap(&writable, &p).is_some(), "{protected}");
        }
        for protected in ["/home/a/state/engine", "/home/a/project", "/tmpfoo", "/var/tmp"] {
            let p = [PathBuf::from(protected)];
            assert_eq!(overlap(&writable, &p), None, "{protected}");
        }
    }

    #[test]
    fn the_overlap_error_names_both_paths_and_why() {
        let err = PolicyError::Overlap { protected: PathBuf::from("/p/.engine"), writable: w("/p") };
        let text = err.to_string();
        assert!(text.contains("/p/.engine") && text.contains("the writable path /p (the workspace)"), "{text}");
        let err = PolicyError::Overlap {
            protected: PathBuf::from("/state"),
            writable: Writable {
                path: PathBuf::from("/state/x"),
                origin: Origin::Declared { as_written: "~/x".into() },
            },
        };
        let text = err.to_string();
        assert!(text.contains("/state/x (declared as \"~/x\") is inside the protected path /state"), "{text}");
    }

    #[test]
    fn declared_paths_expand_tilde_and_refuse_the_rest() {
        let home = Some(Path::new("/home/a"));
        assert_eq!(expand("~/.npm", home).unwrap(), PathBuf::from("/home/a/.npm"));
        assert_eq!(expand("~", home).unwrap(), PathBuf::from("/home/a"));
        assert_eq!(expand("/opt/cache", home).unwrap(), PathBuf::from("/opt/cache"));
        for bad in ["cache", "./cache", "~bob/x", ""] {
            assert!(matches!(expand(bad, home), Err(PolicyError::BadPath { .. })), "{bad}");
        }
        assert!(matches!(expand("~/.npm", None), Err(PolicyError::BadPath { .. })));
    }

    #[test]
    fn resolve_follows_symlinks_and_keeps_a_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        assert_eq!(resolve(&dir.path().join("link")).unwrap(), real);
        assert_eq!(resolve(&dir.path().join("link/a/../b/c")).unwrap(), real.join("b/c"));
    }
}
