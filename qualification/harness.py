"""The qualification harness: runs the candidate binary by absolute path in a
clean environment, records every step of a check, and keeps a bounded
transcript of what the candidate printed as the check's evidence.

Python 3 standard library only. BLAKE3 digests come from `b3sum` (the
official BLAKE3 command line tool); Python's hashlib has no BLAKE3.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Bounds on what a transcript keeps of one stream of one step.
STDOUT_KEEP = 6000
STDERR_KEEP = 3000
# No single engine call in the suite should come near this.
STEP_TIMEOUT = 120


class CheckFailed(Exception):
    """The candidate did not behave as the check expects."""


class HarnessError(Exception):
    """The harness itself could not do its part (a fixture service did not
    start, a temp folder could not be made): the check could not run."""


def b3_file(path):
    """BLAKE3 of a file's bytes, as 64 hex digits (via b3sum)."""
    try:
        out = subprocess.run(["b3sum", "--no-names", str(path)], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise HarnessError("b3sum is not installed (apt-get install b3sum, or cargo install b3sum)")
    except subprocess.CalledProcessError as e:
        raise HarnessError("b3sum %s failed: %s" % (path, e.stderr.strip()))
    return out.split()[0]


def b3_bytes(data):
    if isinstance(data, str):
        data = data.encode()
    try:
        out = subprocess.run(["b3sum", "--no-names"], input=data, check=True, capture_output=True).stdout
    except FileNotFoundError:
        raise HarnessError("b3sum is not installed (apt-get install b3sum, or cargo install b3sum)")
    return out.decode().split()[0]


def canonical(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


IGNORED_NAMES = {"__pycache__", ".engine"}


def tree_files(root):
    """Every regular file under `root`, relative and sorted, skipping
    caches and engine stores."""
    root = Path(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for f in sorted(filenames):
            if f.endswith(".pyc"):
                continue
            p = Path(dirpath) / f
            if p.is_file():
                out.append(p.relative_to(root).as_posix())
    return sorted(out)


def tree_digest(root):
    """A folder's digest: BLAKE3 of the canonical JSON list of
    [relative path, BLAKE3 of content] of its files."""
    root = Path(root)
    files = [[rel, b3_file(root / rel)] for rel in tree_files(root)]
    return {"digest": b3_bytes(canonical(files)), "files": dict(files)}


def copy_tree(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc"))


class Env:
    """What every candidate call runs with: a PATH with no `target/`
    folder and nothing from the source tree, a fresh HOME and TMPDIR, and
    none of the caller's ENGINE_* variables."""

    def __init__(self, scratch, source_top):
        self.scratch = Path(scratch)
        self.home = self.scratch / "home"
        self.tmp = self.scratch / "tmp"
        self.bin = self.scratch / "bin"
        for d in (self.home, self.tmp, self.bin):
            d.mkdir(parents=True)
        # The fixtures run `python3`: point it at the interpreter running
        # this harness (a pyenv shim would need the caller's HOME).
        os.symlink(os.path.realpath(sys.executable), self.bin / "python3")
        dirs = [str(self.bin)]
        for d in ("/usr/local/bin", "/usr/bin", "/bin"):
            if os.path.isdir(d):
                dirs.append(d)
        top = os.path.realpath(source_top)
        for d in dirs:
            real = os.path.realpath(d)
            if "target" in Path(real).parts or real == top or real.startswith(top + os.sep):
                raise HarnessError("refusing PATH entry %s (a target/ folder or inside the source tree)" % d)
        self.path = os.pathsep.join(dirs)
        self.vars = {
            "PATH": self.path,
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "USER": "qualify",
            "LOGNAME": "qualify",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def describe(self):
        return {
            "PATH": self.path,
            "HOME": "fresh empty folder",
            "TMPDIR": "fresh empty folder",
            "inherited_variables": "none (ENGINE_*, CARGO_*, RUST* and the caller's HOME are not passed)",
            "python3": os.path.realpath(sys.executable),
            "engine_on_PATH": shutil.which("engine", path=self.path),
        }


class Step:
    def __init__(self, command, cwd, expected):
        self.command = command
        self.cwd = cwd
        self.expected = expected
        self.exit_code = None
        self.signal = None
        self.stdout = ""
        self.stderr = ""
        self.duration_ms = 0
        self.ok = None

    def outcome(self):
        """What happened, in the same terms as `expected`: an exit code, or
        `killed:SIGNAME`."""
        if self.signal is not None:
            return "killed:%s" % signal.Signals(self.signal).name
        return self.exit_code

    def as_json(self):
        return {
            "command": self.command,
            "cwd": self.cwd,
            "exit_code": self.outcome(),
            "expected": self.expected,
            "ok": self.ok,
            "duration_ms": self.duration_ms,
        }

    def json(self):
        try:
            return json.loads(self.stdout)
        except ValueError as e:
            raise CheckFailed("`%s` did not print one JSON document (%s): %r" % (self.command, e, self.stdout[:300]))


class Check:
    """One check's run: its own folder, its steps, its transcript."""

    def __init__(self, suite, spec):
        self.suite = suite
        self.spec = spec
        self.dir = Path(tempfile.mkdtemp(prefix=spec["id"] + "-", dir=suite.work))
        self.steps = []
        self.transcript = []
        self.services = []

    # -------------------------------------------------------------- steps

    def engine(self, *args, cwd, expect=0, env=None, timeout=STEP_TIMEOUT, stdin=None):
        """Run the candidate by absolute path. `expect` is an exit code, a
        tuple of acceptable codes, `"killed:SIGKILL"`, or None (anything;
        the caller judges)."""
        argv = [self.suite.candidate] + [str(a) for a in args]
        shown = "engine " + " ".join(shlex.quote(str(a)) for a in args)
        if env:
            shown = " ".join("%s=%s" % kv for kv in sorted(env.items())) + " " + shown
        cwd = Path(cwd)
        step = Step(shown, self.rel(cwd), expect)
        full_env = dict(self.suite.env.vars)
        full_env.update(env or {})
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(stdin.encode() if stdin else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += b"\n[qualify: killed after %d s]" % timeout
        step.duration_ms = int((time.monotonic() - t0) * 1000)
        step.stdout = out.decode(errors="replace")
        step.stderr = err.decode(errors="replace")
        if proc.returncode < 0:
            step.signal = -proc.returncode
        else:
            step.exit_code = proc.returncode
        if expect is None:
            step.ok = True
        elif isinstance(expect, tuple):
            step.ok = step.outcome() in expect
        else:
            step.ok = step.outcome() == expect
        self.steps.append(step)
        self.note_step(step)
        if not step.ok:
            raise CheckFailed("`%s` exited %s, expected %s" % (shown, step.outcome(), expect))
        return step

    def spawn(self, *args, cwd):
        """Start the candidate in the background (for a check that needs two
        engines at once); `finish` waits for it and records the step."""
        argv = [self.suite.candidate] + [str(a) for a in args]
        proc = subprocess.Popen(argv, cwd=cwd, env=self.suite.env.vars, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        proc.qualify_step = Step("engine " + " ".join(shlex.quote(str(a)) for a in args) + "  (in the background)", self.rel(Path(cwd)), None)
        proc.qualify_t0 = time.monotonic()
        return proc

    def finish(self, proc, expect=0, timeout=STEP_TIMEOUT):
        step = proc.qualify_step
        step.expected = expect
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        step.duration_ms = int((time.monotonic() - proc.qualify_t0) * 1000)
        step.stdout, step.stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if proc.returncode < 0:
            step.signal = -proc.returncode
        else:
            step.exit_code = proc.returncode
        step.ok = expect is None or step.outcome() == expect
        self.steps.append(step)
        self.note_step(step)
        if not step.ok:
            raise CheckFailed("`%s` exited %s, expected %s" % (step.command, step.outcome(), expect))
        return step

    def rel(self, path):
        try:
            return "$CHECK/" + Path(path).relative_to(self.dir).as_posix()
        except ValueError:
            return str(path)

    def note_step(self, step):
        self.transcript.append("$ (cd %s) %s" % (step.cwd, step.command))
        self.transcript.append("exit: %s (expected %s) in %d ms" % (step.outcome(), step.expected, step.duration_ms))
        for name, text, keep in (("stdout", step.stdout, STDOUT_KEEP), ("stderr", step.stderr, STDERR_KEEP)):
            if text:
                cut = text[:keep]
                self.transcript.append("--- %s (%d bytes%s)" % (name, len(text.encode()), ", truncated" if len(text) > keep else ""))
                self.transcript.append(cut.rstrip("\n"))
        self.transcript.append("")

    def note(self, text):
        self.transcript.append("# " + text)

    def expect(self, cond, what):
        """Assert `what` about the candidate's behaviour; the transcript
        keeps every assertion made, passed or not."""
        self.transcript.append("# %s: %s" % ("ok" if cond else "FAILED", what))
        if not cond:
            raise CheckFailed(what)

    def expect_eq(self, got, want, what):
        self.expect(got == want, "%s: got %r, want %r" % (what, got, want))

    # ----------------------------------------------------------- fixtures

    def fixture(self, name, into=None):
        """A fresh copy of `fixtures/NAME` in this check's folder."""
        dst = self.dir / (into or name)
        copy_tree(self.suite.fixtures[name], dst)
        return dst

    def receiver(self, *flags):
        r = Receiver(self, flags)
        self.services.append(r)
        return r

    def close(self):
        for s in self.services:
            s.stop()


class Receiver:
    """fixtures/receiver/receiver.py, from the check's own copy of the
    fixture, with its own delivery log: the ground truth of what was
    delivered, whatever the engine saw."""

    def __init__(self, check, flags):
        src = check.fixture("receiver", into="receiver-%d" % len(check.services))
        self.log = src / "deliveries.jsonl"
        port_file = src / "port"
        self.stderr = open(src / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            [os.path.realpath(sys.executable), str(src / "receiver.py"), "--port", "0", "--port-file", str(port_file), "--log", str(self.log)] + list(flags),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr, env=check.suite.env.vars, start_new_session=True)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.port = int(port_file.read_text().strip())
                break
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise HarnessError("the receiver fixture did not start")
            time.sleep(0.02)
        self.base = "http://127.0.0.1:%d" % self.port

    def deliveries(self, key=None):
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = [json.loads(l) for l in lines if l.strip()]
        return [d for d in out if key is None or d.get("key") == key]

    def wait_deliveries(self, n, key=None, limit=5.0):
        """A killed client's request may still be on its way through the
        receiver: wait (bounded) until at least `n` are logged."""
        deadline = time.monotonic() + limit
        while True:
            d = self.deliveries(key)
            if len(d) >= n or time.monotonic() > deadline:
                return d
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.stderr.close()
