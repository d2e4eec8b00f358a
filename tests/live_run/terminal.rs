//! A pseudo-terminal for the engine: its stdin, stdout and stderr are the
//! terminal's (so `isatty` holds for it as in a person's shell), the
//! terminal is its controlling one (so Ctrl-C typed there is a SIGINT from
//! the kernel to the foreground process group, the engine's), and a thread
//! keeps everything written to the screen for the test to read while the
//! run goes on.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::common::*;

/// What the terminal showed so far (raw bytes, escape sequences and all).
#[derive(Clone, Default)]
pub struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// Wait until the screen shows `needle` (its colours aside: a word
    /// painted is still the word); the screen then, colours and all.
    #[track_caller]
    pub fn wait_for(&self, needle: &str, limit: Duration) -> String {
        wait_for(limit, || {
            let text = self.text();
            plain(&text).contains(needle).then_some(text)
        })
        .unwrap_or_else(|| panic!("the terminal never showed {needle:?}; it showed:\n{:?}", self.text()))
    }
}

/// A terminal with the engine on it.
pub struct Terminal {
    pub engine: Running,
    pub screen: Screen,
    master: File,
}

impl Terminal {
    /// Start `engine ARGS` in `ws` on a new 100×30 terminal (`NO_COLOR`
    /// removed from its environment, then `env` added).
    pub fn start(ws: &Ws, args: &[&str], env: &[(&str, &str)]) -> Terminal {
        let (master, slave) = open_pty(100, 30);
        let mut cmd = ws.command(args);
        cmd.env_remove("NO_COLOR").env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let fd = |f: &OwnedFd| Stdio::from(f.try_clone().expect("dup the terminal"));
        cmd.stdin(fd(&slave)).stdout(fd(&slave)).stderr(fd(&slave));
        // SAFETY: between fork and exec only async-signal-safe syscalls:
        // a new session, and the terminal (stdin) as its controlling one.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = spawn_with(cmd, ws);
        // Only the engine holds the terminal's other end now: once it (and
        // anything it left on the terminal) is gone, reading ends.
        drop(slave);
        let master = File::from(master);
        let screen = Screen::default();
        let (mut reader, keep) = (master.try_clone().expect("dup the master"), screen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the last process on the terminal closed it.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                keep.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
            }
        });
        Terminal { engine: child, screen, master }
    }

    /// Type `bytes` on the terminal's keyboard.
    pub fn type_keys(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("type on the terminal");
    }
}

/// Start a prepared command whose output goes to the terminal (the
/// `Running` files stay empty).
fn spawn_with(mut cmd: Command, ws: &Ws) -> Running {
    let (out, err) = (ws.root().join("terminal.stdout"), ws.root().join("terminal.stderr"));
    File::create(&out).expect("stdout file");
    File::create(&err).expect("stderr file");
    Running::new(cmd.spawn().expect("start the engine on a terminal"), out, err)
}

/// A new pseudo-terminal of `cols`×`rows`: (master, slave).
fn open_pty(cols: u16, rows: u16) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: out-pointers to locals; the name buffer is not asked for.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // Neither end leaks into the engine's providers (the slave is dup'ed
    // onto the engine's stdin, stdout and stderr) or other tests' engines.
    for fd in [&master, &slave] {
        // SAFETY: plain fcntl on a descriptor owned here.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    (master, slave)
}

/// Does `text` hold an SGR (colour/style) escape sequence, `ESC [ … m`?
/// Cursor movements and line clears (`ESC [ 2K`, `ESC [ 1A`) are not.
pub fn has_colour(text: &str) -> bool {
    text.split('\x1b').skip(1).any(|rest| {
        let Some(params) = rest.strip_prefix('[') else { return false };
        let end = params.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        end.is_some_and(|i| params[i..].starts_with('m'))
    })
}

/// `text` without its SGR (colour/style) sequences: what a person reads.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('\x1b') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let sgr = tail.strip_prefix('[').and_then(|params| {
            let end = params.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            params[end..].starts_with('m').then_some(&params[end + 1..])
        });
        match sgr {
            Some(after) => rest = after,
            None => {
                out.push('\x1b');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn plain_drops_colour_and_keeps_everything_else() {
    assert_eq!(plain("\x1b[31m\x1b[1mstopped\x1b[0m: x"), "stopped: x");
    assert_eq!(plain("\r\x1b[2K\x1b[1A[0/2]"), "\r\x1b[2K\x1b[1A[0/2]");
}

#[test]
fn has_colour_tells_sgr_from_cursor_movement() {
    assert!(has_colour("a\x1b[32mgreen\x1b[0m"));
    assert!(has_colour("\x1b[1;31mx"));
    assert!(!has_colour("\r\x1b[2K\x1b[1A[0/2] goal g r1"));
    assert!(!has_colour("T1 first \\x1b[32m escaped"));
}
