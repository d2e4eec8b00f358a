//! The workspace boundary: expanding a task's declared inputs (paths, globs,
//! folders) to files, refusing anything that leaves the workspace — by `..`,
//! by an absolute path, or through a symlink.

use foldhash::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The engine's own folder inside a workspace; never an input.
pub const STORE_DIR: &str = ".engine";

/// Expanded inputs are bounded: a glob that matches more is an error, not a
/// silent cut (TigerStyle: a limit on everything).
pub use crate::limits::INPUT_FILES_MAX;

/// Expand one declared input to workspace-relative file paths (sorted).
/// A literal path that does not exist yet expands to itself: a task may
/// create its inputs' files, and the checkpoint then records them as absent.
pub fn expand_input(workspace: &Path, pattern: &str) -> Result<Vec<String>, String> {
    Expander::new(workspace)?.expand(pattern)
}

/// Expands inputs under one workspace, resolving each folder's real path
/// once, one level at a time: a folder that is not a symlink is its
/// parent's real path plus its name, so a task's ten files in one folder
/// cost no `realpath` at all, and a folder already resolved costs nothing.
/// Short-lived on purpose (one plan load, one pass over a run's tasks): a
/// folder swapped for a symlink later is seen by the next `Expander`.
pub struct Expander {
    root: PathBuf,
    /// Real paths of the folders met, by their path's bytes.
    dirs: HashMap<OsString, PathBuf>,
    /// The metadata of the regular files expanded from a literal path (not
    /// symlinks: theirs is the link's), by relative path.
    files: HashMap<String, Metadata>,
    /// Each folder's listing (`None`: too large or unreadable), so a
    /// folder's kind costs no `statx` of its own — nor, when checking
    /// only, a file's.
    listings: HashMap<OsString, Option<Listing>>,
    /// Checking only (`Expander::checking`): files' kinds come from the
    /// listings too, and no metadata is kept.
    checking: bool,
    /// `literal_file`'s path, its allocation kept from one file to the next.
    scratch: PathBuf,
    /// The folder `literal_file` last found inside (empty: none yet): a
    /// task's files in one folder cost no lookup after the first.
    inside: PathBuf,
    /// The process's working folder is the workspace (the same folder by
    /// device and inode when the `Expander` is made: not merely the same
    /// path, which a mount over it would keep): `literal_file` looks at a file by
    /// its relative path, which the kernel walks from there — three names
    /// for `src/t0001/f00.txt`, not also every name of the workspace's own
    /// path (a no-op re-run's most frequent kernel work after `statx`
    /// itself). The engine never changes its working folder.
    at_cwd: bool,
    /// The stored root's real path now, when it is no longer `root` (asked
    /// once, only when a path resolves outside `root`): a look after the
    /// workspace's folder or a parent was replaced judges inside by where
    /// `root` resolves now. Outer `None`: not asked.
    moved: Option<Option<PathBuf>>,
}

/// What a name is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: std::fs::FileType) -> Kind {
        if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }
}

/// A folder's names and their kinds (from the listing's `d_type`).
type Listing = HashMap<OsString, Kind>;

/// A folder with more names than this is not listed: its names are looked
/// at one by one, as a literal input under a huge folder should be.
const LISTING_NAMES_MAX: usize = 4096;

impl Expander {
    pub fn new(workspace: &Path) -> Result<Expander, String> {
        let root = std::fs::canonicalize(workspace).map_err(|e| format!("cannot resolve workspace: {e}"))?;
        let at_cwd = same_folder(Path::new("."), &root);
        Ok(Expander { at_cwd, ..Expander::resolved(root) })
    }

    /// An `Expander` under `root`, the workspace's real path resolved once
    /// for the whole run (the run holds its workspace: docs/trust.md, "How
    /// the workspace is looked at"): a look a task costs no `realpath` of
    /// the workspace. Files are looked at by their whole path, never
    /// relative to the working folder (a task may have replaced the
    /// workspace's folder, leaving the engine's working folder a removed
    /// one): no `statx` of `.` and the workspace to tell.
    pub fn resolved(root: PathBuf) -> Expander {
        Expander {
            root,
            dirs: HashMap::default(),
            files: HashMap::default(),
            listings: HashMap::default(),
            checking: false,
            scratch: PathBuf::new(),
            inside: PathBuf::new(),
            at_cwd: false,
            moved: None,
        }
    }

    /// An `Expander` that only checks (a plan load): the kind of a literal
    /// input comes from its folder's listing — one read per folder instead
    /// of a `statx` per file — and no file's metadata is kept. The run
    /// observes the files themselves later, each once.
    pub fn checking(workspace: &Path) -> Result<Expander, String> {
        let mut e = Expander::new(workspace)?;
        e.checking = true;
        Ok(e)
    }

    /// Check `pattern` as a plan load does (`Expander::checking`): kinds
    /// from the folders' listings, nothing kept of any file. One
    /// `Expander` may check some inputs and observe others.
    pub fn check(&mut self, pattern: &str) -> Result<(), String> {
        let observing = !std::mem::replace(&mut self.checking, true);
        let checked = self.expand(pattern).map(drop);
        if observing {
            self.checking = false;
        }
        checked
    }

    /// `expand`, each file with the metadata its expansion read (a regular
    /// file's; `None` for a symlink or an absent file), appended to `out`.
    /// A plain literal path naming a regular file in a folder known to be
    /// inside costs one `statx` (`literal_file`); anything else — refusals
    /// included — takes the general way.
    pub fn expand_observed(&mut self, pattern: &str, out: &mut Vec<(String, Option<Metadata>)>) -> Result<(), String> {
        if !self.checking {
            if let Some(found) = self.literal_file(pattern) {
                out.push(found);
                return Ok(());
            }
        }
        for rel in self.expand(pattern)? {
            let meta = self.files.remove(&rel);
            out.push((rel, meta));
        }
        Ok(())
    }

    /// The general way's answer for a plain literal path (`is_plain`) that
    /// names a regular file whose folder resolves inside the workspace, or
    /// `None`: the file is not one (absent, a symlink, a folder), its folder
    /// is outside, or the path is not plain. Equal to `expand`'s by
    /// construction: a regular file is inside when its folder is
    /// (`check_inside`), and its relative path is the pattern itself
    /// (`normalize` of a plain path).
    fn literal_file(&mut self, pattern: &str) -> Option<(String, Option<Metadata>)> {
        if !is_plain(pattern) || in_store_dir(pattern) {
            return None;
        }
        let mut path = std::mem::take(&mut self.scratch);
        under_into(&mut path, &self.root, pattern);
        let found = self.regular_inside(&path, pattern).map(|meta| (pattern.to_string(), Some(meta)));
        self.scratch = path;
        found
    }

    /// `path`'s metadata when it is a regular file whose folder resolves
    /// inside the workspace; `rel` is `path` relative to the workspace.
    fn regular_inside(&mut self, path: &Path, rel: &str) -> Option<Metadata> {
        let meta = if self.at_cwd { std::fs::symlink_metadata(rel) } else { std::fs::symlink_metadata(path) }.ok()?;
        if !meta.file_type().is_file() {
            return None;
        }
        let dir = parent_and_name(path).0?;
        if dir.as_os_str() != self.inside.as_os_str() {
            if !self.dir_inside(dir).ok()? {
                return None;
            }
            let known = self.inside.as_mut_os_string();
            known.clear();
            known.push(dir.as_os_str());
        }
        Some(meta)
    }

    pub fn expand(&mut self, pattern: &str) -> Result<Vec<String>, String> {
        lexically_inside(pattern).map_err(str::to_string)?;
        let mut out = Vec::new();
        // `dir/**` is everything under `dir`, but the glob crate yields only
        // the folders below `dir` for it, never the files directly in `dir`:
        // expanded as the folder `dir` (or the folders a glob `dir` names).
        let (pattern, everything_under) = match pattern.strip_suffix("/**") {
            Some(dir) if !dir.is_empty() => (dir, true),
            _ if pattern == "**" => (".", true),
            _ => (pattern, false),
        };
        if pattern.contains(['*', '?', '[']) {
            // The workspace's own path is literal: a folder named `a[1]` is
            // not a character class.
            let root = glob::Pattern::escape(&self.root.to_string_lossy());
            let full = format!("{root}/{pattern}");
            let opts = glob::MatchOptions { require_literal_leading_dot: true, ..Default::default() };
            let paths = glob::glob_with(&full, opts).map_err(|e| format!("is not a valid glob: {e}"))?;
            for entry in paths {
                let path = entry.map_err(|e| format!("cannot be read: {e}"))?;
                self.collect(&path, None, None, &mut out)?;
            }
        } else {
            let rel = normalize(pattern);
            let path = under(&self.root, &rel);
            if let Some(kind) = self.kind(&path, Some(&rel)) {
                self.collect(&path, Some(kind), Some(rel), &mut out)?;
            } else {
                // Absent: make sure no existing ancestor is a symlink out.
                self.absent_inside(&path)?;
                if !everything_under {
                    out.push(rel);
                }
            }
        }
        if out.len() > INPUT_FILES_MAX {
            return Err(format!("matches {} files; the limit is {INPUT_FILES_MAX}", out.len()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The metadata `expand` read of `rel`, a regular file named by a
    /// literal input (a later read need not `statx` it again).
    pub fn metadata_of(&mut self, rel: &str) -> Option<Metadata> {
        self.files.remove(rel)
    }

    /// What `path` is, not followed (`None`: absent or unreadable). An
    /// `Expander` that observes keeps a regular file's metadata for
    /// `metadata_of`; one that checks reads the kind from the listing of
    /// the folder.
    /// `rel`: the path relative to the workspace, when the caller has it.
    fn kind(&mut self, path: &Path, rel: Option<&str>) -> Option<Kind> {
        if self.checking {
            if let Some(listed) = self.listed_kind(path) {
                return listed;
            }
        }
        let meta = std::fs::symlink_metadata(path).ok()?;
        let kind = Kind::of(meta.file_type());
        if kind == Kind::File && !self.checking {
            let rel = match rel {
                Some(r) => Ok(r.to_string()),
                None => relative(&self.root, path),
            };
            if let Ok(rel) = rel {
                self.files.insert(rel, meta);
            }
        }
        Some(kind)
    }

    /// The kind of a folder on the way to an input: from its parent's
    /// listing (a task folder among a thousand costs no `statx`), else
    /// looked at alone.
    fn dir_kind(&mut self, dir: &Path) -> Option<Kind> {
        match self.listed_kind(dir) {
            Some(listed) => listed,
            None => std::fs::symlink_metadata(dir).ok().map(|m| Kind::of(m.file_type())),
        }
    }

    /// The kind of `path` from its folder's listing: `None` when the
    /// folder could not be listed whole.
    fn listed_kind(&mut self, path: &Path) -> Option<Option<Kind>> {
        let (dir, name) = parent_and_name(path);
        let (dir, name) = (dir?, name?);
        // Looked up by reference first: a folder listed already costs no
        // copy of its path.
        if !self.listings.contains_key(dir.as_os_str()) {
            self.listings.insert(dir.as_os_str().to_os_string(), list(dir));
        }
        Some(self.listings.get(dir.as_os_str())?.as_ref()?.get(name).copied())
    }

    /// `kind`: the path's kind, and `rel` its path relative to the
    /// workspace, when the caller has them.
    fn collect(
        &mut self,
        path: &Path,
        kind: Option<Kind>,
        rel: Option<String>,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let is_dir = self.check_inside(path, kind)?;
        let rel = match rel {
            Some(rel) => rel,
            None => relative(&self.root, path)?,
        };
        if in_store_dir(&rel) {
            self.files.remove(&rel);
            return Ok(());
        }
        if is_dir {
            // Symlinks are followed (walkdir refuses loops), so a linked folder's
            // files are inputs under the link's path; every file is then
            // checked to resolve inside the workspace.
            for entry in walkdir::WalkDir::new(path).follow_links(true).sort_by_file_name() {
                let entry = entry.map_err(|e| format!("cannot be read: {e}"))?;
                let p = entry.path();
                if entry.file_type().is_dir() {
                    continue;
                }
                self.check_inside(p, None)?;
                let rel = relative(&self.root, p)?;
                if in_store_dir(&rel) {
                    self.files.remove(&rel);
                } else {
                    out.push(rel);
                }
            }
        } else {
            out.push(rel);
        }
        Ok(())
    }

    /// The real path of a folder, resolved once per `Expander`, one level
    /// at a time (a `realpath` only where a symlink is met).
    fn real_dir(&mut self, dir: &Path) -> Result<PathBuf, String> {
        if dir.as_os_str() == self.root.as_os_str() {
            return Ok(self.root.clone());
        }
        if let Some(real) = self.dirs.get(dir.as_os_str()) {
            return Ok(real.clone());
        }
        let real = match parent_and_name(dir) {
            (Some(parent), Some(name)) if is_below(dir, &self.root) && self.dir_kind(dir) == Some(Kind::Dir) => {
                let mut real = self.real_dir(parent)?;
                real.push(name);
                real
            }
            _ => std::fs::canonicalize(dir).map_err(|e| format!("cannot be resolved: {e}"))?,
        };
        self.dirs.insert(dir.as_os_str().to_os_string(), real.clone());
        Ok(real)
    }

    /// Does folder `dir` resolve inside the workspace? (No copy of its real
    /// path once it is known.)
    fn dir_inside(&mut self, dir: &Path) -> Result<bool, String> {
        if dir.as_os_str() == self.root.as_os_str() {
            return Ok(true);
        }
        if let Some(real) = self.dirs.get(dir.as_os_str()) {
            if is_below(real, &self.root) {
                return Ok(true);
            }
            let real = real.clone();
            return Ok(self.below_moved_root(&real));
        }
        let real = self.real_dir(dir)?;
        Ok(self.resolves_inside(&real))
    }

    /// Resolve `path` (following symlinks, as far as it exists) and require
    /// the result to be inside the workspace. Returns whether it resolves
    /// to a folder. `kind`: the path's, when the caller has it.
    fn check_inside(&mut self, path: &Path, kind: Option<Kind>) -> Result<bool, String> {
        if path.as_os_str() == self.root.as_os_str() {
            return Ok(true);
        }
        let kind = match kind {
            Some(k) => Some(k),
            None => self.kind(path, None),
        };
        let (parent, name) = parent_and_name(path);
        let (inside, is_dir, real) = match (kind, parent, name) {
            // Not a symlink itself: inside when its folder is (its real path
            // is its folder's plus its name).
            (Some(k), Some(parent), Some(_)) if k != Kind::Symlink => (self.dir_inside(parent)?, k == Kind::Dir, None),
            (Some(_), _, _) => {
                let real = std::fs::canonicalize(path).map_err(|e| format!("cannot be resolved: {e}"))?;
                (self.resolves_inside(&real), real.is_dir(), Some(real))
            }
            (None, _, _) => {
                let real = self.resolve_absent(path)?;
                (self.resolves_inside(&real), false, Some(real))
            }
        };
        if inside {
            return Ok(is_dir);
        }
        let real = match real {
            Some(r) => r,
            None => match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => self.real_dir(parent)?.join(name),
                _ => path.to_path_buf(),
            },
        };
        Err(format!("resolves through a symlink to {}, outside the workspace", real.display()))
    }
}

impl Expander {
    /// Is `real`, a resolved path, the workspace or below it: below `root`,
    /// or below the workspace's real path now if its folder or a parent was
    /// replaced since `root` was resolved (`Expander::resolved`).
    fn resolves_inside(&mut self, real: &Path) -> bool {
        is_below(real, &self.root) || self.below_moved_root(real)
    }

    /// Is `real` below the workspace's real path now, when that is no
    /// longer `root`? (One `realpath` a look, only on this rare path.)
    fn below_moved_root(&mut self, real: &Path) -> bool {
        let root = &self.root;
        let moved = self.moved.get_or_insert_with(|| std::fs::canonicalize(root).ok().filter(|now| now != root));
        moved.as_deref().is_some_and(|now| is_below(real, now))
    }

    /// `check_inside` of a path just found absent (its kind not asked
    /// again).
    fn absent_inside(&mut self, path: &Path) -> Result<(), String> {
        let real = self.resolve_absent(path)?;
        if self.resolves_inside(&real) {
            return Ok(());
        }
        Err(format!("resolves through a symlink to {}, outside the workspace", real.display()))
    }

    /// The real path of `path`, just found absent: its longest existing
    /// ancestor resolved (`real_dir`: the workspace itself costs nothing,
    /// a folder below it a `statx` of each name not resolved yet), the rest
    /// appended (it cannot be a symlink).
    fn resolve_absent(&mut self, path: &Path) -> Result<PathBuf, String> {
        let mut existing = path.to_path_buf();
        let mut rest = Vec::new();
        loop {
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
            if existing.as_os_str() == self.root.as_os_str() || std::fs::symlink_metadata(&existing).is_ok() {
                break;
            }
        }
        let mut real = self.real_dir(&existing)?;
        for name in rest.into_iter().rev() {
            real.push(name);
        }
        Ok(real)
    }
}

/// `a` and `b` are one folder (device and inode, both followed).
fn same_folder(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.is_dir() && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The names of `dir` and their kinds, or `None` when it cannot be listed
/// or holds more than `LISTING_NAMES_MAX` names. A name whose kind the
/// listing does not say (`DT_UNKNOWN`) costs the `lstat` std makes for it.
fn list(dir: &Path) -> Option<Listing> {
    let mut names = HashMap::default();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        if names.len() == LISTING_NAMES_MAX {
            return None;
        }
        names.insert(entry.file_name(), Kind::of(entry.file_type().ok()?));
    }
    Some(names)
}

/// `path` is `root` or below it, compared as bytes (both are built from
/// the resolved root, so no component needs normalizing).
fn is_below(path: &Path, root: &Path) -> bool {
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    p.strip_prefix(r).is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/") || r.ends_with(b"/"))
}

fn relative(root: &Path, path: &Path) -> Result<String, String> {
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    // The common case, as bytes: `path` is `root` + `/` + the rest.
    let fast = p.strip_prefix(r).and_then(|rest| match rest {
        [] => Some(rest),
        _ if r.ends_with(b"/") => Some(rest),
        [b'/', tail @ ..] if !tail.starts_with(b"/") => Some(tail),
        _ => None,
    });
    let rel = match fast {
        Some(rest) => String::from_utf8_lossy(rest),
        None => path
            .strip_prefix(root)
            .map_err(|_| format!("{} is outside the workspace", path.display()))?
            .to_string_lossy(),
    };
    Ok(if rel.contains('\\') { rel.replace('\\', "/") } else { rel.into_owned() })
}

/// `(path.parent(), path.file_name())`, read from the bytes when the last
/// `/` plainly splits them (the paths an `Expander` builds are normalized),
/// from `Path`'s components otherwise.
fn parent_and_name(path: &Path) -> (Option<&Path>, Option<&OsStr>) {
    let b = path.as_os_str().as_bytes();
    if let Some(i) = b.iter().rposition(|&c| c == b'/') {
        let (dir, name) = (&b[..i], &b[i + 1..]);
        let plain = |x: &[u8]| !x.is_empty() && x != b"." && x != b"..";
        let dir_plain = plain(dir) && !dir.ends_with(b"/") && !dir.ends_with(b"/.") && !dir.ends_with(b"/..");
        if plain(name) && dir_plain && dir != b"." {
            return (Some(Path::new(OsStr::from_bytes(dir))), Some(OsStr::from_bytes(name)));
        }
    }
    (path.parent(), path.file_name())
}

/// A literal relative path with nothing to normalize: not empty, not
/// absolute, no glob character, no empty, `.` or `..` part (so
/// `lexically_inside` accepts it and `normalize` returns it as it is).
fn is_plain(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    !b.is_empty()
        && !b.iter().any(|c| matches!(c, b'*' | b'?' | b'['))
        && b.split(|&c| c == b'/').all(|part| !part.is_empty() && part != b"." && part != b"..")
}

/// `rel`'s first component is the store's folder (`STORE_DIR`).
fn in_store_dir(rel: &str) -> bool {
    rel.strip_prefix(STORE_DIR).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `root`/`rel` (a normalized relative path), without `Path::join`'s
/// per-component look at what it appends.
pub fn under(root: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        return root.to_path_buf();
    }
    let mut bytes = Vec::with_capacity(root.as_os_str().len() + 1 + rel.len());
    bytes.extend_from_slice(root.as_os_str().as_bytes());
    if !bytes.ends_with(b"/") {
        bytes.push(b'/');
    }
    bytes.extend_from_slice(rel.as_bytes());
    PathBuf::from(OsString::from_vec(bytes))
}

/// `under`, written into `path` (its allocation reused).
pub fn under_into(path: &mut PathBuf, root: &Path, rel: &str) {
    let buf = path.as_mut_os_string();
    buf.clear();
    buf.push(root.as_os_str());
    if !root.as_os_str().as_bytes().ends_with(b"/") {
        buf.push("/");
    }
    buf.push(rel);
}

/// `./a//b` → `a/b`; `a/../b` → `b` (lexically; already checked inside).
fn normalize(pattern: &str) -> String {
    // The common case: nothing to drop (`..` is refused before this).
    if !pattern.as_bytes().split(|&b| b == b'/').any(|p| p.is_empty() || p == b"." || p == b"..") {
        return pattern.to_string();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// An input must be relative and never climb above the workspace.
pub fn lexically_inside(input: &str) -> Result<(), &'static str> {
    if input.is_empty() {
        return Err("is empty");
    }
    // As `Path::components` reads it on Unix, without building each
    // component: a leading `/` is the root; empty and `.` parts are
    // skipped; every other part but `..` is a name.
    if input.starts_with('/') {
        return Err("is an absolute path");
    }
    let mut depth: i64 = 0;
    for part in input.as_bytes().split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            // Any `..` is refused, not only one that climbs out: after a
            // symlinked folder, `link/..` is not the folder it reads as, so
            // the checkpoint would cover another file than the one named.
            b".." => {
                depth -= 1;
                return Err(if depth < 0 {
                    "climbs out of the workspace with `..`"
                } else {
                    "uses `..`; name the path without it"
                });
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-level reading of an input: what `Path::components` read
    /// before (absolute, `..` after how many names), and `normalize`'s
    /// fast path equal to its slow one.
    #[test]
    fn parent_and_name_are_paths_own() {
        let cases = [
            "/",
            "/a",
            "/a/b",
            "/a/b/c.txt",
            "a",
            "a/b",
            "./a",
            "a/./b",
            "a/.",
            "a/..",
            "a//b",
            "a/b/",
            "//a",
            "/a/../b",
            "/a/b/..",
            ".",
            "..",
            "../a",
            "/.a/b",
            "/a/.b",
            "a/b/./c",
            "a/b/../c",
            "",
            "a/./x/b",
            "/a/b/.",
            "/a/b/c/",
        ];
        for c in cases {
            let p = Path::new(c);
            assert_eq!(parent_and_name(p), (p.parent(), p.file_name()), "{c:?}");
        }
    }

    #[test]
    fn lexically_inside_and_normalize_read_as_path_components_do() {
        use std::path::Component;
        fn by_components(input: &str) -> Result<(), &'static str> {
            if input.is_empty() {
                return Err("is empty");
            }
            let mut depth: i64 = 0;
            for c in Path::new(input).components() {
                match c {
                    Component::Prefix(_) | Component::RootDir => return Err("is an absolute path"),
                    Component::ParentDir => {
                        depth -= 1;
                        return Err(if depth < 0 {
                            "climbs out of the workspace with `..`"
                        } else {
                            "uses `..`; name the path without it"
                        });
                    }
                    Component::CurDir => {}
                    Component::Normal(_) => depth += 1,
                }
            }
            Ok(())
        }
        let cases = [
            "",
            "/",
            "/a",
            "//a",
            "a",
            "a/b",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "a/.",
            ".",
            "./",
            "..",
            "../a",
            "a/..",
            "a/../b",
            "./..",
            "a/b/../..",
            ".../a",
            "a/..b",
            "..a",
            "a\\..",
            "a/./../b",
            "./././a",
            "a/b/c.txt",
        ];
        for c in cases {
            assert_eq!(lexically_inside(c), by_components(c), "{c:?}");
            if lexically_inside(c).is_ok() {
                let slow: Vec<&str> = c.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
                assert_eq!(normalize(c), slow.join("/"), "{c:?}");
            }
        }
        assert!(in_store_dir(STORE_DIR));
        assert!(in_store_dir(&format!("{STORE_DIR}/x")));
        assert!(!in_store_dir(&format!("{STORE_DIR}x/y")));
        assert!(!in_store_dir(&format!("a/{STORE_DIR}")));
    }

    #[test]
    fn a_literal_regular_file_keeps_the_metadata_its_expansion_read() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::write(w.join("a.txt"), "abc").unwrap();
        std::os::unix::fs::symlink("a.txt", w.join("link.txt")).unwrap();
        let mut e = Expander::new(w).unwrap();
        assert_eq!(e.expand("a.txt").unwrap(), vec!["a.txt"]);
        assert_eq!(e.metadata_of("a.txt").map(|m| m.len()), Some(3));
        assert!(e.metadata_of("a.txt").is_none(), "taken once");
        assert_eq!(e.expand("link.txt").unwrap(), vec!["link.txt"]);
        assert!(e.metadata_of("link.txt").is_none(), "a symlink's own metadata is not its target's");
        assert_eq!(e.expand("*.txt").unwrap(), vec!["a.txt", "link.txt"]);
        assert_eq!(e.metadata_of("a.txt").map(|m| m.len()), Some(3), "a glob's regular files keep theirs too");
        assert!(e.metadata_of("link.txt").is_none());
    }

    #[test]
    fn literal_glob_and_folder_expand_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("src/sub")).unwrap();
        std::fs::write(w.join("src/b.py"), "b").unwrap();
        std::fs::write(w.join("src/a.py"), "a").unwrap();
        std::fs::write(w.join("src/sub/c.txt"), "c").unwrap();
        assert_eq!(expand_input(w, "src/*.py").unwrap(), vec!["src/a.py", "src/b.py"]);
        assert_eq!(expand_input(w, "src").unwrap(), vec!["src/a.py", "src/b.py", "src/sub/c.txt"]);
        assert_eq!(expand_input(w, "./src//a.py").unwrap(), vec!["src/a.py"]);
        assert_eq!(expand_input(w, "new/file.txt").unwrap(), vec!["new/file.txt"]);
    }

    #[test]
    fn everything_under_a_folder_includes_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("tests/unit")).unwrap();
        std::fs::write(w.join("tests/a.py"), "a").unwrap();
        std::fs::write(w.join("tests/unit/b.py"), "b").unwrap();
        std::fs::write(w.join("top.txt"), "t").unwrap();
        let all = vec!["tests/a.py".to_string(), "tests/unit/b.py".to_string()];
        assert_eq!(expand_input(w, "tests/**").unwrap(), all);
        assert_eq!(expand_input(w, "./tests/**").unwrap(), all);
        assert_eq!(expand_input(w, "tes*/**").unwrap(), all);
        assert_eq!(expand_input(w, "tests/**/*.py").unwrap(), all);
        assert_eq!(expand_input(w, "**").unwrap(), vec!["tests/a.py", "tests/unit/b.py", "top.txt"]);
        assert_eq!(expand_input(w, "missing/**").unwrap(), Vec::<String>::new(), "nothing under an absent folder");
    }

    #[test]
    fn escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::os::unix::fs::symlink(outside.path(), w.join("out")).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        assert!(expand_input(w, "../x").is_err());
        assert!(expand_input(w, "/etc/passwd").is_err());
        assert!(expand_input(w, "out/secret").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "out/*").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "out/not-yet").unwrap_err().contains("symlink"));
        assert!(expand_input(w, "a/../../x").is_err());
        assert!(expand_input(w, "a/../x").unwrap_err().contains("`..`"));
    }

    /// A look under the workspace's real path resolved at the run's start
    /// answers as one that resolves it afresh (as each look did before
    /// 33865ef) after the workspace's folder, or a parent, is replaced: by
    /// a new folder, or by a link to the old one moved away.
    #[test]
    fn a_look_after_the_workspace_or_a_parent_is_replaced_answers_as_a_fresh_one() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let (p, w) = (top.join("p"), top.join("p/ws"));
        let lay_out = |w: &Path, content: &str| {
            std::fs::create_dir_all(w.join("a/real")).unwrap();
            std::fs::write(w.join("a/real/f.txt"), content).unwrap();
            std::os::unix::fs::symlink("real", w.join("a/in")).unwrap();
            std::os::unix::fs::symlink(w.join("a/real"), w.join("a/abs")).unwrap();
            // Outside, and where the workspace was before it was replaced.
            std::os::unix::fs::symlink(top.join("elsewhere"), w.join("a/out")).unwrap();
            std::os::unix::fs::symlink(top.join("p/ws-old/a/real"), w.join("a/old")).unwrap();
        };
        std::fs::create_dir_all(top.join("elsewhere")).unwrap();
        std::fs::write(top.join("elsewhere/f.txt"), "out").unwrap();
        lay_out(&w, "one");
        let cases = ["a/real/f.txt", "a/in/f.txt", "a/abs/f.txt", "a/in/absent.txt", "a/abs/absent/x", "a/in", "a/**"];
        let refused = ["a/out/f.txt", "a/out/absent.txt", "a/old/f.txt", "a/old/absent.txt"];
        let same = |when: &str| {
            for c in cases.iter().chain(&refused) {
                let got = Expander::resolved(w.clone()).expand(c);
                let want = Expander::new(&w).unwrap().expand(c);
                assert_eq!(got, want, "{c:?}, {when}");
            }
            for c in refused {
                let got = Expander::resolved(w.clone()).expand(c);
                assert!(got.is_err(), "{c:?}, {when}: refused, got {got:?}");
            }
        };
        same("as resolved");
        std::fs::rename(&w, top.join("p/ws-old")).unwrap();
        lay_out(&w, "two");
        same("the workspace's folder replaced by a new one");
        std::fs::rename(&p, top.join("p2")).unwrap();
        std::os::unix::fs::symlink(top.join("p2"), &p).unwrap();
        assert_ne!(w.canonicalize().unwrap(), w, "the workspace now resolves elsewhere");
        same("a parent replaced by a link to it moved");
    }

    /// Both kinds of `Expander` (observing: `lstat` per name; checking:
    /// each folder's listing) draw the boundary alike, at any depth.
    #[test]
    fn checking_and_observing_refuse_the_same_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("a/b/real")).unwrap();
        std::fs::write(w.join("a/b/real/f.txt"), "f").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("a/b/out")).unwrap();
        std::os::unix::fs::symlink("real", w.join("a/b/in")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), w.join("a/b/real/leak.txt")).unwrap();
        let resolved = Expander::resolved(w.canonicalize().unwrap());
        for mut e in [Expander::new(w).unwrap(), Expander::checking(w).unwrap(), resolved] {
            assert_eq!(e.expand("a/b/real/f.txt").unwrap(), vec!["a/b/real/f.txt"]);
            assert!(e.expand("a/b/out/deeper/not-yet").unwrap_err().contains("symlink"), "an absent folder too");
            assert_eq!(e.expand("a/b/in/f.txt").unwrap(), vec!["a/b/in/f.txt"], "a link that stays inside");
            assert!(e.expand("a/b/out/secret").unwrap_err().contains("symlink"));
            assert!(e.expand("a/b/out/not-yet").unwrap_err().contains("symlink"));
            assert!(e.expand("a/b/real/leak.txt").unwrap_err().contains("symlink"), "a linked file");
            assert!(e.expand("a/b/real/*").unwrap_err().contains("symlink"));
            assert!(e.expand("a/b").unwrap_err().contains("outside the workspace"));
            assert_eq!(e.expand("a/b/real/new.txt").unwrap(), vec!["a/b/real/new.txt"]);
        }
        // Only the observing one keeps what it read of a file.
        let mut checking = Expander::checking(w).unwrap();
        checking.expand("a/b/real/f.txt").unwrap();
        assert!(checking.metadata_of("a/b/real/f.txt").is_none());
    }

    /// `expand_observed`'s fast way for a literal file answers as the
    /// general way (`expand`, then `metadata_of`) does, refusals included:
    /// the same files, the same metadata, the same error.
    #[test]
    fn a_literal_files_fast_expansion_equals_the_general_one() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("a/real")).unwrap();
        std::fs::create_dir_all(w.join(STORE_DIR)).unwrap();
        std::fs::write(w.join("top.txt"), "t").unwrap();
        std::fs::write(w.join("a/real/f.txt"), "ff").unwrap();
        std::fs::write(w.join(format!("{STORE_DIR}/x")), "x").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("a/out")).unwrap();
        std::os::unix::fs::symlink("real", w.join("a/in")).unwrap();
        std::os::unix::fs::symlink("f.txt", w.join("a/real/link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), w.join("a/real/leak.txt")).unwrap();
        let cases = [
            "top.txt",
            "a/real/f.txt",
            "a/in/f.txt",
            "a/real/link.txt",
            "a/real/leak.txt",
            "a/out/secret",
            "a/out/not-yet",
            "a/real/absent.txt",
            "absent/deeper.txt",
            "a/out/absent/deeper.txt",
            "a/in/absent/deeper.txt",
            "top.txt/under-a-file",
            "a/real",
            "a/real/",
            "./a/real/f.txt",
            "a//real/f.txt",
            "a/real/./f.txt",
            "a/real/../real/f.txt",
            "../x",
            "/etc/passwd",
            STORE_DIR,
            ".engine/x",
            "a/real/*.txt",
            "a/real/**",
            "",
        ];
        type Answer = Result<Vec<(String, Option<(u64, u64)>)>, String>;
        let seen = |m: Option<Metadata>| m.map(|m| (std::os::unix::fs::MetadataExt::ino(&m), m.len()));
        // Twice over one `Expander` each: first with no folder known, then
        // with every folder resolved already.
        let (mut fast, mut general) = (Expander::new(w).unwrap(), Expander::new(w).unwrap());
        for round in 0..2 {
            for c in cases {
                let mut out = Vec::new();
                let got: Answer =
                    fast.expand_observed(c, &mut out).map(|()| out.into_iter().map(|(r, m)| (r, seen(m))).collect());
                let want: Answer = general
                    .expand(c)
                    .map(|rels| rels.into_iter().map(|r| (r.clone(), seen(general.metadata_of(&r)))).collect());
                assert_eq!(got, want, "{c:?}, round {round}");
            }
        }
        // Under the workspace's real path resolved once (a run's looks),
        // the same answers.
        let mut resolved = Expander::resolved(w.canonicalize().unwrap());
        for c in cases {
            let mut out = Vec::new();
            let got: Answer =
                resolved.expand_observed(c, &mut out).map(|()| out.into_iter().map(|(r, m)| (r, seen(m))).collect());
            let want: Answer = Expander::new(w).unwrap().expand(c).map(|rels| {
                rels.into_iter()
                    .map(|r| (r.clone(), seen(std::fs::symlink_metadata(w.join(&r)).ok().filter(|m| m.is_file()))))
                    .collect()
            });
            assert_eq!(got, want, "{c:?}, resolved");
        }
        let mut out = Vec::new();
        fast.expand_observed("a/real/f.txt", &mut out).unwrap();
        assert_eq!(seen(out.pop().and_then(|(_, m)| m)).map(|(_, len)| len), Some(2), "the file's own metadata");
        // Checking and observing share one `Expander` and refuse alike.
        let mut both = Expander::new(w).unwrap();
        for c in cases {
            let mut out = Vec::new();
            let checked = both.check(c);
            let observed = both.expand_observed(c, &mut out).map(drop);
            assert_eq!(checked, observed, "{c:?}");
        }
        let mut checking = Expander::new(w).unwrap();
        assert_eq!(checking.check("a/real/f.txt"), Ok(()));
        assert!(checking.metadata_of("a/real/f.txt").is_none(), "a check keeps nothing");
    }

    #[test]
    fn a_file_looked_at_from_the_working_folder_is_the_file_under_the_root() {
        // A workspace that is the test's working folder (the package's),
        // its fixture in a folder below it.
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let dir = tempfile::Builder::new().prefix(".expander-at-cwd").tempdir_in(&cwd).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = dir.path();
        let base = w.strip_prefix(&cwd).unwrap().to_str().unwrap().to_string();
        std::fs::create_dir_all(w.join("a/real")).unwrap();
        std::fs::write(w.join("top.txt"), "t").unwrap();
        std::fs::write(w.join("a/real/f.txt"), "ff").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("a/out")).unwrap();
        std::os::unix::fs::symlink("real", w.join("a/in")).unwrap();
        std::os::unix::fs::symlink("f.txt", w.join("a/real/link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), w.join("a/real/leak.txt")).unwrap();
        let cases = ["top.txt", "a/real/f.txt", "a/in/f.txt", "a/real/link.txt", "a/real/leak.txt", "a/out/secret"];
        let cases = cases.iter().chain(&["a/real/absent.txt", "a/real", "a/real/*.txt"]);
        type Answer = Result<Vec<(String, Option<(u64, u64)>)>, String>;
        let seen = |m: Option<Metadata>| m.map(|m| (std::os::unix::fs::MetadataExt::ino(&m), m.len()));
        let mut from_cwd = Expander::new(&cwd).unwrap();
        assert!(from_cwd.at_cwd, "the working folder is the workspace");
        let mut from_root = Expander::new(&cwd).unwrap();
        from_root.at_cwd = false;
        for c in cases {
            let pattern = format!("{base}/{c}");
            let mut answers: Vec<Answer> = Vec::new();
            for e in [&mut from_cwd, &mut from_root] {
                let mut out = Vec::new();
                answers.push(
                    e.expand_observed(&pattern, &mut out)
                        .map(|()| out.into_iter().map(|(r, m)| (r, seen(m))).collect()),
                );
            }
            assert_eq!(answers[0], answers[1], "{pattern}");
        }
        let mut out = Vec::new();
        from_cwd.expand_observed(&format!("{base}/a/real/f.txt"), &mut out).unwrap();
        let f = std::fs::metadata(w.join("a/real/f.txt")).unwrap();
        assert_eq!(seen(out.pop().and_then(|(_, m)| m)), seen(Some(f)), "the file's own metadata");
        assert!(!Expander::new(w).unwrap().at_cwd, "another folder than the working one");
    }

    #[test]
    fn a_linked_folder_inside_is_walked_under_its_link() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        std::fs::create_dir_all(w.join("src")).unwrap();
        std::fs::create_dir_all(w.join("vendor/lib")).unwrap();
        std::fs::write(w.join("src/main.py"), "m").unwrap();
        std::fs::write(w.join("vendor/lib/m.py"), "X=1").unwrap();
        std::os::unix::fs::symlink("../vendor/lib", w.join("src/lib")).unwrap();
        assert_eq!(expand_input(w, "src").unwrap(), vec!["src/lib/m.py", "src/main.py"]);
        // A linked folder that leads out is refused, file by file.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("s"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), w.join("src/out")).unwrap();
        assert!(expand_input(w, "src").unwrap_err().contains("outside the workspace"));
    }
}
