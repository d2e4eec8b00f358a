//! Issue 40: MCP's official conformance kit (`@modelcontextprotocol/
//! conformance`, pinned in fixtures/node with the Node.js 22 it needs),
//! every client scenario run against the real `engine` binary, each a test
//! of its own named after the scenario. The kit starts its test server,
//! then runs `fixtures/conformance/client.py`, which does what a person
//! does with the engine: a one-task plan calling the scenario's tool,
//! `engine login` (opening the URL it shows as a browser would), `engine
//! run`, `engine answer`, `engine approve`, `engine login --scope` when a
//! run names it. The verdict is the kit's own: its checks (`--verbose`
//! prints them as JSON) and its exit code.
//!
//! A scenario passes when the kit says so: exit 0, no check failed or
//! warned. One the engine refuses on purpose, or does not speak (an
//! extension, a revision it does not claim), is marked so here with the
//! exact checks the kit fails it on, and why (docs/providers.md, "The
//! conformance kit"): such a test fails as soon as the kit's verdict
//! changes either way.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::*;

/// What a scenario is expected to end in.
enum Expect {
    /// Every check passes; the kit exits 0.
    Pass,
    /// The kit fails exactly these checks (ids), every other one passes;
    /// `why` is the reason the engine does not do what they ask.
    Fails { checks: &'static [&'static str], why: &'static str },
}

/// The kit's verdict on one scenario.
struct Verdict {
    exit: Option<i32>,
    checks: Vec<Value>,
    transcript: String,
}

impl Verdict {
    fn with(&self, status: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .checks
            .iter()
            .filter(|c| c["status"] == status)
            .filter_map(|c| c["id"].as_str().map(String::from))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// Bound on one scenario, the kit's own timeout for the client included.
const SCENARIO_LIMIT: Duration = Duration::from_secs(240);

fn kit(args: &[&str], ws: &Ws) -> (Option<i32>, String, String) {
    let (node, kit) = crate::support::node::conformance_kit(&repo_root());
    let mut cmd = Command::new(node);
    cmd.arg(kit).args(args).current_dir(repo_root().join("fixtures/conformance"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ENGINE_") || name.to_string_lossy().starts_with("MCP_") {
            cmd.env_remove(&name);
        }
    }
    cmd.env("CONFORMANCE_ENGINE", ENGINE)
        .env("CONFORMANCE_WS", &ws.dir)
        .env("CONFORMANCE_LOG", ws.side.join("adapter.log"))
        .env("XDG_STATE_HOME", ws.state_home())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_COLOR", "1");
    let (out, err) = (ws.side.join("kit.out"), ws.side.join("kit.err"));
    cmd.stdin(Stdio::null()).stdout(std::fs::File::create(&out).unwrap()).stderr(std::fs::File::create(&err).unwrap());
    let mut child = cmd.spawn().expect("the pinned Node.js runs the kit");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > SCENARIO_LIMIT {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |p| std::fs::read_to_string(p).unwrap_or_default();
    (status.code(), read(&out), read(&err))
}

/// Run one client scenario with the engine as the client.
fn run(scenario: &str, ws: &Ws) -> Verdict {
    let args = ["client", "--command", "python3 client.py", "--scenario", scenario, "--timeout", "200000", "--verbose"];
    let (exit, out, err) = kit(&args, ws);
    let checks: Vec<Value> = serde_json::from_str(out.trim()).unwrap_or_else(|e| {
        panic!("the kit printed no checks ({e}):\n{out}\n{err}\n{}", ws.side.join("adapter.log").display())
    });
    let adapter = std::fs::read_to_string(ws.side.join("adapter.log")).unwrap_or_default();
    Verdict { exit, checks, transcript: format!("--- the kit\n{err}\n--- the person (client.py)\n{adapter}") }
}

fn scenario(name: &str, expect: Expect) -> Ws {
    let ws = Ws::new();
    let v = run(name, &ws);
    let (failed, warned) = (v.with("FAILURE"), v.with("WARNING"));
    match expect {
        Expect::Pass => {
            assert!(
                failed.is_empty() && warned.is_empty() && v.exit == Some(0),
                "{name}: the kit failed {failed:?}, warned {warned:?}, exit {:?}\n{}",
                v.exit,
                v.transcript
            );
            assert!(!v.with("SUCCESS").is_empty(), "{name}: no check passed at all\n{}", v.transcript);
        }
        Expect::Fails { checks, why } => {
            let mut want: Vec<String> = checks.iter().map(|c| c.to_string()).collect();
            want.sort();
            assert_eq!(
                (failed, warned, v.exit),
                (want, Vec::<String>::new(), Some(1)),
                "{name} is marked as failing exactly these checks ({why}); the kit now says otherwise\n{}",
                v.transcript
            );
        }
    }
    ws
}

/// A client secret (the plan names where it is; registration may give
/// one) is kept beside the tokens, in the 0600 token file, and nowhere
/// else: not in the workspace, the store, nor anything the engine printed
/// (the adapter's transcript holds every output of every command).
fn secret_kept_beside_the_tokens_only(ws: &Ws, secret: &str) {
    use std::os::unix::fs::PermissionsExt;
    let files =
        |dir: &std::path::Path| -> Vec<std::path::PathBuf> { walk(dir).into_iter().filter(|p| p.is_file()).collect() };
    let holds = |p: &std::path::Path| std::fs::read(p).map(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()));
    let tokens = ws.state_home().join("engine/oauth");
    let kept: Vec<_> = files(&tokens).into_iter().filter(|p| holds(p).unwrap_or(false)).collect();
    assert_eq!(kept.len(), 1, "the secret is kept in the token file: {kept:?}");
    assert_eq!(std::fs::metadata(&kept[0]).unwrap().permissions().mode() & 0o777, 0o600);
    // The kit's own output (kit.out, kit.err) shows its secrets itself.
    let engines = files(&ws.side).into_iter().filter(|p| !p.ends_with("kit.out") && !p.ends_with("kit.err"));
    let everywhere = files(&ws.dir).into_iter().chain(files(&ws.state_home().join("engine/stores"))).chain(engines);
    for f in everywhere {
        assert!(!holds(&f).unwrap_or(false), "the client secret leaked into {}", f.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

macro_rules! scenarios {
    ($($test:ident: $name:literal => $expect:expr $(, then $then:expr)?;)*) => {
        $(
            #[test]
            fn $test() {
                let _ws = scenario($name, $expect);
                $(($then)(&_ws);)?
            }
        )*

        /// Every scenario this module runs, by the kit's name.
        const COVERED: &[&str] = &[$($name),*];
    };
}

/// The server's first question was answered in the call that asked it:
/// one `engine run`, and a person's `engine answer` from another process
/// while it ran (the transcript of client.py), recorded beside the run.
fn answered_in_the_call(ws: &Ws) {
    let transcript = std::fs::read_to_string(ws.side.join("adapter.log")).unwrap_or_default();
    let runs = transcript.lines().filter(|l| l.starts_with("$ ") && l.contains(" run ")).count();
    let answers = transcript.lines().filter(|l| l.starts_with("$ ") && l.contains(" answer T1")).count();
    assert_eq!((runs, answers), (1, 1), "one run, answered while it waited:\n{transcript}");
    assert!(transcript.contains("the run holds the question open"), "{transcript}");
}
/// Authorization of the 2025-03-26 revision, which the engine does not
/// claim: no protected resource metadata, the server its own
/// authorization server, endpoints guessed.
const NOT_2025_03_26_AUTH: &str = "2025-03-26 authorization (no protected resource metadata; the MCP server \
    taken for its own authorization server) is not spoken: a token's audience and issuer come from RFC 9728 \
    metadata only";
/// Extensions the engine does not speak.
const NO_MACHINE_GRANTS: &str = "the engine's tokens come from a person's authorization code grant (`engine \
    login`); client-credentials and token-exchange grants are not spoken";

scenarios! {
    // Revisions 2025-06-18 and 2025-11-25: the ones the engine claims.
    initialize: "initialize" => Expect::Pass;
    tools_call: "tools_call" => Expect::Pass;
    // The plan holds the question open (`ask`); the person answers it from
    // a second process while the one run waits.
    elicitation_sep1034_client_defaults: "elicitation-sep1034-client-defaults" => Expect::Pass,
        then answered_in_the_call;
    sse_retry: "sse-retry" => Expect::Pass;
    auth_metadata_default: "auth/metadata-default" => Expect::Pass;
    auth_metadata_var1: "auth/metadata-var1" => Expect::Pass;
    auth_metadata_var2: "auth/metadata-var2" => Expect::Pass;
    auth_metadata_var3: "auth/metadata-var3" => Expect::Pass;
    auth_basic_cimd: "auth/basic-cimd" => Expect::Pass;
    auth_scope_from_www_authenticate: "auth/scope-from-www-authenticate" => Expect::Pass;
    auth_scope_from_scopes_supported: "auth/scope-from-scopes-supported" => Expect::Pass;
    auth_scope_omitted_when_undefined: "auth/scope-omitted-when-undefined" => Expect::Pass;
    auth_scope_step_up: "auth/scope-step-up" => Expect::Pass;
    auth_scope_retry_limit: "auth/scope-retry-limit" => Expect::Pass;
    // The secret registration gave (`test-secret-…`) or the plan names.
    auth_token_endpoint_auth_basic: "auth/token-endpoint-auth-basic" => Expect::Pass,
        then |ws: &Ws| secret_kept_beside_the_tokens_only(ws, "test-secret-");
    auth_token_endpoint_auth_post: "auth/token-endpoint-auth-post" => Expect::Pass,
        then |ws: &Ws| secret_kept_beside_the_tokens_only(ws, "test-secret-");
    auth_token_endpoint_auth_none: "auth/token-endpoint-auth-none" => Expect::Pass;
    auth_pre_registration: "auth/pre-registration" => Expect::Pass,
        then |ws: &Ws| secret_kept_beside_the_tokens_only(ws, "pre-registered-secret");
    // Back-compat with 2025-03-26, which the engine does not claim.
    auth_2025_03_26_oauth_metadata_backcompat: "auth/2025-03-26-oauth-metadata-backcompat" => Expect::Fails {
        checks: &["authorization-server-metadata", "authorization-request", "client-registration", "token-request"],
        why: NOT_2025_03_26_AUTH,
    };
    auth_2025_03_26_oauth_endpoint_fallback: "auth/2025-03-26-oauth-endpoint-fallback" => Expect::Fails {
        checks: &["authorization-request", "client-registration", "token-request"],
        why: NOT_2025_03_26_AUTH,
    };
    // Drafts.
    auth_resource_mismatch: "auth/resource-mismatch" => Expect::Pass;
    auth_offline_access_scope: "auth/offline-access-scope" => Expect::Pass;
    auth_offline_access_not_supported: "auth/offline-access-not-supported" => Expect::Pass;
    // Extensions.
    auth_client_credentials_jwt: "auth/client-credentials-jwt" => Expect::Fails {
        checks: &["client-credentials-grant-type", "client-credentials-jwt-verified"],
        why: NO_MACHINE_GRANTS,
    };
    auth_client_credentials_basic: "auth/client-credentials-basic" => Expect::Fails {
        checks: &["client-credentials-basic-auth", "client-credentials-grant-type"],
        why: NO_MACHINE_GRANTS,
    };
    auth_cross_app_access_complete_flow: "auth/cross-app-access-complete-flow" => Expect::Fails {
        checks: &["complete-flow-jwt-bearer", "complete-flow-token-exchange"],
        why: NO_MACHINE_GRANTS,
    };
}

/// The kit's client scenarios are exactly those run above (a kit that
/// grows one fails here until it is run), and none is for 2026-07-28 yet
/// (the kit does not know that revision: `--spec-version 2026-07-28` is
/// refused).
#[test]
fn every_client_scenario_of_the_kit_is_run_and_none_is_for_2026_07_28() {
    let ws = Ws::new();
    let (exit, out, err) = kit(&["list", "--client"], &ws);
    assert_eq!(exit, Some(0), "{out}\n{err}");
    let listed: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_once(" ["))
        .map(|(name, tags)| (name, tags.trim_end_matches(']')))
        .collect();
    let mut names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
    names.sort();
    let mut covered = COVERED.to_vec();
    covered.sort();
    assert_eq!(names, covered, "the kit's client scenarios and this module's tests");
    assert!(listed.iter().all(|(_, tags)| !tags.contains("2026-07-28")), "{listed:?}");
    let (exit, out, err) = kit(&["list", "--client", "--spec-version", "2026-07-28"], &ws);
    assert_ne!(exit, Some(0), "the kit knows 2026-07-28 now: run its scenarios\n{out}");
    assert!(err.contains("Unknown spec version"), "{err}");
}
