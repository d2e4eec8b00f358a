#!/usr/bin/env bash
# Tests of qualification/qualify itself: that it says GO for the real
# installed binary, and NO-GO or "could not run" when it must.
#
#   qualification/test_qualify.sh
#
# With QUALIFY_TEST_CANDIDATE=/path/to/installed/engine it reuses that
# binary (for example the one a CI qualification run just installed: the
# `candidate.path` of its manifest) and skips its own install; otherwise it
# installs one with `qualification/qualify --install-root` (a GO run).
# With QUALIFY_TEST_GO_OUT=DIR, QUALIFY_TEST_GO_STDOUT=FILE and
# QUALIFY_TEST_GO_CODE=N as well (the --out folder, the stdout and the exit
# status of the qualify run that installed that binary, as .ci/run passes
# its own), it judges that run instead of making its own GO run, and checks
# that the binary is still the one that run judged.
# Needs python3, b3sum, and (without QUALIFY_TEST_CANDIDATE) cargo.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
q="$here/qualify"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-qualify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; passed=$((passed + 1)); }

# Run qualify; keep stdout, stderr and the exit code.
qualify() { # name args...
    local name=$1; shift
    set +e
    "$q" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    echo $? >"$tmp/$name.code"
    set -e
}
code_of() { cat "$tmp/$1.code"; }
# The manifest path is the last line of stdout.
manifest_of() { tail -n 1 "$tmp/$1.out"; }
# Evaluate a Python expression over the manifest `m`.
m() { # name expr
    python3 - "$(manifest_of "$1")" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
checks = {c["id"]: c for c in m["checks"]}
reasons = [r["code"] for r in m["verdict_reasons"]]
v = eval(sys.argv[2])
print(json.dumps(v) if not isinstance(v, str) else v)
EOF
}
expect_eq() { # got want what
    [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"
}
show() { echo "--- $1: exit $(code_of "$1")"; cat "$tmp/$1.out" "$tmp/$1.err" >&2; }

# ---------------------------------------------------------------- GO
go_out="$tmp/out-go"
if [ -n "${QUALIFY_TEST_CANDIDATE:-}" ] && [ -n "${QUALIFY_TEST_GO_OUT:-}" ]; then
    # The GO run the caller just made of this candidate (.ci/run's own
    # qualification): its --out folder and its stdout, judged below as a
    # run of our own would be, instead of a fourth whole run.
    real=$QUALIFY_TEST_CANDIDATE
    go_out=$QUALIFY_TEST_GO_OUT
    echo "using QUALIFY_TEST_CANDIDATE=$real and its GO run in QUALIFY_TEST_GO_OUT=$go_out"
    cp "$QUALIFY_TEST_GO_STDOUT" "$tmp/go.out" && : >"$tmp/go.err"
    echo "${QUALIFY_TEST_GO_CODE:?QUALIFY_TEST_GO_CODE: the exit status of that run}" >"$tmp/go.code"
elif [ -n "${QUALIFY_TEST_CANDIDATE:-}" ]; then
    real=$QUALIFY_TEST_CANDIDATE
    echo "using QUALIFY_TEST_CANDIDATE=$real"
    qualify go --candidate "$real" --out "$go_out"
else
    qualify go --install-root "$tmp/root" --out "$go_out"
    real="$tmp/root/bin/engine"
fi
[ "$(code_of go)" = 0 ] || { show go; fail "the real installed candidate did not qualify"; }
expect_eq "$(manifest_of go)" "$go_out/qualification-manifest.json" "last line is the manifest path"
expect_eq "$(m go 'm["candidate"]["path"]')" "$real" "the candidate qualified"
expect_eq "$(m go 'm["candidate"]["blake3_after"]')" "$(b3sum --no-names "$real" | cut -d' ' -f1)" "the candidate is still the binary judged"
expect_eq "$(m go 'm["verdict"]')" GO "verdict"
expect_eq "$(m go 'm["candidate"]["kind"]')" installed "candidate kind"
expect_eq "$(m go 'm["candidate"]["digest_stable"]')" true "digest stable"
expect_eq "$(m go 'all(c["verdict"] == "pass" for c in m["checks"]) and len(m["checks"]) >= 15')" true "every check listed and passed"
expect_eq "$(m go 'all(c["claims"] and c["does_not_claim"] and c["evidence_excerpt_digest"] for c in m["checks"])')" true "each check states claims, non-claims, evidence digest"
ok "the installed candidate qualifies: GO with every check listed"

# ---------------------------------------------------------------- settle as a no-op
mkdir -p "$tmp/noop"
cat >"$tmp/noop/engine" <<EOF
#!/usr/bin/env bash
# The real engine, except that \`settle\` does nothing and says it worked.
for a in "\$@"; do
    if [ "\$a" = settle ]; then exit 0; fi
done
exec "$real" "\$@"
EOF
chmod +x "$tmp/noop/engine"
qualify noop --candidate "$tmp/noop/engine" --out "$tmp/out-noop"
[ "$(code_of noop)" = 1 ] || { show noop; fail "a candidate whose settle is a no-op must be NO-GO (exit 1)"; }
expect_eq "$(m noop 'm["verdict"]')" NO-GO "verdict"
expect_eq "$(m noop '"unknown_outcome_settle_approve_retry" in m["failing_checks"]')" true "the settle-dependent check is named"
expect_eq "$(m noop 'checks["unknown_outcome_settle_approve_retry"]["verdict"]')" fail "its verdict"
expect_eq "$(m noop 'sorted(m["failing_checks"])')" '["approval_consumed_by_one_call", "unknown_outcome_settle_approve_retry"]' "only the checks that settle fail"
grep -q "unknown_outcome_settle_approve_retry" "$tmp/noop.out" || fail "stdout names the failing check"
ok "settle as a no-op: NO-GO naming unknown_outcome_settle_approve_retry"

# ---------------------------------------------------------------- tampering
mkdir -p "$tmp/tamper"
cat >"$tmp/tamper/engine" <<EOF
#!/usr/bin/env bash
# The real engine; on the first \`run\` it appends to this very file, the
# candidate being qualified.
if [ "\${1:-}" = run ] && [ ! -e "$tmp/tamper/done" ]; then
    : >"$tmp/tamper/done"
    printf '\n# tampered\n' >>"\$0"
fi
exec "$real" "\$@"
EOF
chmod +x "$tmp/tamper/engine"
qualify tamper --candidate "$tmp/tamper/engine" --out "$tmp/out-tamper"
[ "$(code_of tamper)" = 1 ] || { show tamper; fail "a candidate changed during the suite must be NO-GO (exit 1)"; }
[ -e "$tmp/tamper/done" ] || fail "the tampering wrapper never ran"
expect_eq "$(m tamper 'm["verdict"]')" NO-GO "verdict"
expect_eq "$(m tamper '"CANDIDATE_DIGEST_MISMATCH" in reasons')" true "CANDIDATE_DIGEST_MISMATCH among the reasons"
expect_eq "$(m tamper 'm["candidate"]["blake3"] != m["candidate"]["blake3_after"]')" true "digests before and after differ"
expect_eq "$(m tamper 'm["failing_checks"]')" '[]' "every check itself passed: the mismatch alone is NO-GO"
grep -q CANDIDATE_DIGEST_MISMATCH "$tmp/tamper.err" || fail "stderr names CANDIDATE_DIGEST_MISMATCH"
ok "candidate changed during the run: NO-GO with CANDIDATE_DIGEST_MISMATCH"

# ---------------------------------------------------------------- forbidden places
forbidden() { # name candidate-path what
    qualify "$1" --candidate "$2" --out "$tmp/out-$1"
    [ "$(code_of "$1")" = 2 ] || { show "$1"; fail "$3: must exit 2"; }
    grep -q SOURCE_BINARY_FORBIDDEN "$tmp/$1.err" || { show "$1"; fail "$3: stderr names SOURCE_BINARY_FORBIDDEN"; }
    expect_eq "$(m "$1" 'm["error"]["code"]')" SOURCE_BINARY_FORBIDDEN "$3: manifest error code"
    expect_eq "$(m "$1" 'm["verdict"]')" NOT-RUN "$3: verdict"
    expect_eq "$(m "$1" 'm["checks"]')" '[]' "$3: no check ran"
    ok "$3: SOURCE_BINARY_FORBIDDEN (exit 2)"
}
# An executable file inside the source tree (this tree's own qualify).
forbidden intree "$top/qualification/qualify" "a candidate inside the source tree"
# The same through a symlink from outside.
mkdir -p "$tmp/link"
ln -s "$top/qualification/qualify" "$tmp/link/engine"
forbidden symlink "$tmp/link/engine" "a symlink from outside into the source tree"
# A copy of the real binary in a folder named target/.
mkdir -p "$tmp/elsewhere/target/release"
cp "$real" "$tmp/elsewhere/target/release/engine"
forbidden target "$tmp/elsewhere/target/release/engine" "a candidate in a target/ folder"
# A copy in a cargo build folder under another name (cargo's CACHEDIR.TAG).
mkdir -p "$tmp/build-out/release"
printf 'Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by cargo.\n' >"$tmp/build-out/CACHEDIR.TAG"
cp "$real" "$tmp/build-out/release/engine"
forbidden cachedir "$tmp/build-out/release/engine" "a candidate in a cargo build folder"

# ---------------------------------------------------------------- a source-tree run is never GO
if command -v cargo >/dev/null; then
    qualify source --source-tree --check version_identifies_build --check money_demo_fail_explain_repair --out "$tmp/out-source"
    [ "$(code_of source)" = 1 ] || { show source; fail "a source-tree run must never be GO"; }
    expect_eq "$(m source 'm["candidate"]["kind"]')" source "kind"
    expect_eq "$(m source 'm["verdict"]')" NO-GO "verdict"
    expect_eq "$(m source '"CANDIDATE_KIND_SOURCE" in reasons')" true "CANDIDATE_KIND_SOURCE among the reasons"
    expect_eq "$(m source 'm["failing_checks"]')" '[]' "its checks passed: the kind alone is NO-GO"
    ok "a source-tree run: kind source, NO-GO"
else
    echo "skip: no cargo for the source-tree run"
fi

# ---------------------------------------------------------------- usage
mkdir -p "$tmp/full" && : >"$tmp/full/x"
qualify usage --candidate "$real" --out "$tmp/full"
expect_eq "$(code_of usage)" 2 "a non-empty --out"
ok "a non-empty --out is refused (exit 2)"

echo "test_qualify: $passed passed, 0 failed"
