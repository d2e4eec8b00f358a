//! Issue 27, OAuth 2.1 for remote MCP servers, end to end: an
//! authorization server (`fixtures/oauth/auth_server.py`) and an MCP server
//! that wants its bearer tokens (`fixtures/mcp/http_server.py
//! --oauth-issuer`), both on loopback, started here. The test plays the
//! person's browser: it follows the URL `engine login` shows (the server
//! approves on its own) to the engine's loopback redirect. Every claim is
//! judged from what the servers recorded: the authorization server's log
//! (PKCE verified, the `resource` on each request, refresh rotation) and
//! the MCP server's (the bearer token and the resource it was issued for on
//! each request; no `tools/call` without one).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::common::*;

/// A loopback authorization server and an MCP server that wants its tokens.
struct Servers {
    children: Vec<Child>,
    issuer: String,
    url: String,
    side: PathBuf,
}

fn start(script: &str, args: &[String], port_file: &std::path::Path) -> (Child, u16) {
    let child = Command::new("python3")
        .arg(repo_root().join(script))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 starts {script}: {e}"));
    let port = wait_until(Duration::from_secs(20), script, || {
        std::fs::read_to_string(port_file).ok().and_then(|p| p.trim().parse::<u16>().ok())
    });
    (child, port)
}

impl Servers {
    /// `as_flags` go to the authorization server, `mcp_flags` to the MCP server.
    fn start(ws: &Ws, as_flags: &[&str], mcp_flags: &[&str]) -> Servers {
        let side = ws.side.clone();
        let s = |p: &str| side.join(p).to_string_lossy().into_owned();
        let mut args = vec!["--port-file".into(), s("as.port"), "--tokens".into(), s("issued.json")];
        args.extend(["--log".into(), s("as.jsonl")]);
        args.extend(as_flags.iter().map(|f| f.to_string()));
        let (auth, as_port) = start("fixtures/oauth/auth_server.py", &args, &side.join("as.port"));
        let issuer = format!("http://127.0.0.1:{as_port}");
        let mut args = vec!["--port-file".into(), s("mcp.port"), "--received".into(), s("received.jsonl")];
        args.extend(["--log".into(), ws.mcp_log().to_string_lossy().into_owned()]);
        args.extend(["--oauth-issuer".into(), issuer.clone(), "--oauth-tokens".into(), s("issued.json")]);
        args.extend(["--auth-log".into(), s("auth.jsonl"), "--reject-tokens-if".into(), s("reject")]);
        args.extend(mcp_flags.iter().map(|f| f.to_string()));
        let (mcp, mcp_port) = start("fixtures/mcp/http_server.py", &args, &side.join("mcp.port"));
        let url = format!("http://127.0.0.1:{mcp_port}/mcp");
        Servers { children: vec![auth, mcp], issuer, url, side }
    }

    fn lines(&self, name: &str) -> Vec<Value> {
        read_json_lines(&self.side.join(name))
    }

    /// The authorization server's record of its token endpoint.
    fn token_requests(&self) -> Vec<Value> {
        self.lines("as.jsonl").into_iter().filter(|e| e["endpoint"] == "token").collect()
    }

    /// The MCP server's record of each request's bearer token.
    fn auth_log(&self) -> Vec<Value> {
        self.lines("auth.jsonl")
    }

    /// The messages the MCP server accepted (past the token check).
    fn received(&self, method: &str) -> Vec<Value> {
        self.lines("received.jsonl").into_iter().filter(|m| m["method"] == method).collect()
    }

    fn plan(&self, oauth: Value) -> Value {
        plan(
            json!({"fx": {"kind": "mcp", "url": self.url, "auth": {"oauth": oauth}}}),
            vec![json!({"ref": "T1", "title": "render", "provider": "fx", "effect": "local",
                        "action": {"tool": "render", "arguments": {}},
                        "validations": [{"id": "V1", "run": ["true"], "expect_exit": 0}]})],
        )
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP GET: status, the `Location` header, body.
fn get(url: &str) -> (u16, Option<String>, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(authority).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read answer");
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let location = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("location")).map(|(_, v)| v.trim()))
        .map(str::to_string);
    (status, location, body.to_string())
}

/// `engine login plan.json fx` in the background, and the authorization
/// URL it shows once it shows it.
fn login(ws: &Ws, extra: &[&str]) -> (Running, String) {
    let mut args = vec!["--json", "login", "plan.json", "fx", "--timeout", "60"];
    args.extend_from_slice(extra);
    let mut running = ws.spawn_engine(&args);
    let err = running.stderr_path().to_path_buf();
    let started = Instant::now();
    let url = loop {
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        if let Some(u) = text.lines().find(|l| l.starts_with("http://") && l.contains("/authorize?")) {
            break u.to_string();
        }
        if !running.alive() || started.elapsed() > Duration::from_secs(30) {
            let out = running.wait(Duration::from_secs(5));
            panic!("engine login showed no authorization URL\n{}", out.describe());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (running, url)
}

/// The query value `key` of a URL (percent-decoded enough for our values).
fn query(url: &str, key: &str) -> String {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    let v = q.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v).unwrap_or("");
    v.replace("%3A", ":").replace("%2F", "/").replace("%20", " ")
}

/// The person's whole login: follow the URL, land on the redirect.
fn log_in(ws: &Ws, extra: &[&str]) -> Out {
    let (mut running, url) = login(ws, extra);
    let (status, location, _) = get(&url);
    assert_eq!(status, 302, "the authorization server approves: {url}");
    let (status, _, page) = get(&location.expect("a redirect"));
    assert_eq!(status, 200, "{page}");
    running.wait(Duration::from_secs(60))
}

/// The token file's record (the engine's only copy of the tokens).
fn kept(ws: &Ws) -> Value {
    let dir = ws.state_home().join("engine/oauth");
    let file = std::fs::read_dir(&dir)
        .expect("the tokens' folder")
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "json"));
    serde_json::from_slice(&std::fs::read(file.expect("a token file").path()).unwrap()).unwrap()
}

#[test]
fn login_then_a_run_calls_the_tool_with_the_bearer_token_for_its_resource() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({"scopes": ["mcp:tools"]})));

    let login = log_in(&ws, &[]);
    login.expect_code(0);
    let said = login.json();
    assert_eq!((said["provider"].as_str(), said["registered"].as_bool()), (Some("fx"), Some(true)), "{said}");
    assert_eq!(said["resource"], servers.url.as_str());
    let register: Vec<Value> = servers.lines("as.jsonl").into_iter().filter(|e| e["endpoint"] == "register").collect();
    assert_eq!(register.len(), 1, "no client_id in the plan: registered (RFC 7591)");
    assert_eq!(register[0]["token_endpoint_auth_method"], "none");
    let authorize: Vec<Value> =
        servers.lines("as.jsonl").into_iter().filter(|e| e["endpoint"] == "authorize").collect();
    assert_eq!(authorize[0]["resource"], servers.url.as_str(), "RFC 8707 on the authorization request");
    assert_eq!(authorize[0]["scope"], "mcp:tools");
    assert!(authorize[0]["checks"].as_object().unwrap().values().all(|v| v == true), "{authorize:?}");
    let tokens = servers.token_requests();
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0]["grant_type"], "authorization_code");
    assert_eq!(tokens[0]["checks"]["pkce"], true, "the server verified S256: {tokens:?}");
    assert_eq!(tokens[0]["resource"], servers.url.as_str(), "RFC 8707 on the token request");

    let record = kept(&ws);
    let dir = ws.state_home().join("engine/oauth");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600, "{:?}", f.path());
    }

    let run = ws.run();
    run.expect(0, None);
    let calls = servers.received("tools/call");
    assert_eq!(calls.len(), 1, "one call");
    let access = record["access_token"].as_str().unwrap();
    let by_call: Vec<Value> = servers.auth_log().into_iter().filter(|e| e["method"] == "tools/call").collect();
    assert_eq!(by_call.len(), 1);
    assert_eq!(by_call[0]["token"], access, "the call carried the kept token");
    assert_eq!(by_call[0]["resource"], servers.url.as_str(), "issued for this server");
    assert!(by_call[0].get("refused").is_none());

    // The tokens are nowhere but their file.
    let refresh = record["refresh_token"].as_str().unwrap();
    let log = ws.engine(&["log", "--json"]);
    let report = ws.engine(&["report", "--json"]);
    let html = ws.root().join("report.html");
    let page = ws.engine(&["report", "--html", html.to_str().unwrap()]);
    let explain = ws.engine(&["explain", "T1", "--json"]);
    for out in [&log, &report, &page, &explain] {
        out.expect_code(0);
    }
    assert!(log.stdout.contains("tool_inventory"), "the log was read: {}", log.describe());
    let mut said = vec![login.stdout, login.stderr, run.stdout, run.stderr, log.stdout, log.stderr];
    said.extend([
        report.stdout,
        report.stderr,
        explain.stdout,
        explain.stderr,
        std::fs::read_to_string(&html).unwrap(),
    ]);
    let store_dir = ws.store_dir();
    for f in std::fs::read_dir(&store_dir).unwrap().flatten() {
        said.push(String::from_utf8_lossy(&std::fs::read(f.path()).unwrap()).into_owned());
    }
    for (i, text) in said.iter().enumerate() {
        assert!(!text.contains(access) && !text.contains(refresh), "a token in output or store #{i}");
    }
    assert!(said.len() > 10, "the store's files were read");
}

#[test]
fn a_run_without_a_token_sends_nothing_and_names_the_login() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    let run = ws.run();
    run.expect(2, Some("AUTHORIZATION_REQUIRED"));
    let plan = ws.path("plan.json");
    let advice = format!("engine login {} fx", plan.display());
    assert!(run.stdout.contains(&advice), "the exact command: {}", run.describe());
    assert!(servers.auth_log().is_empty(), "nothing reached the server: {:?}", servers.auth_log());
    assert!(servers.received("tools/call").is_empty());
    assert_eq!(ws.task_state("T1"), "pending", "not started: nothing was sent");
    assert_eq!(ws.attempt_count(), 0, "no intent either");
}

/// Step-up: the server refuses a `tools/call` for want of scope (`403
/// insufficient_scope`, before doing anything: the call never reaches
/// its `--received`). The run stops `AUTHORIZATION_REQUIRED` naming the
/// login with the scope granted so far and the one asked, the task is
/// pending again; the person logs in so, and the next plain run sends the
/// call once, and it is done once.
#[test]
fn a_call_refused_for_want_of_scope_stops_for_a_login_with_that_scope_then_goes_once() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &["--call-scope", "mcp:write"]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    log_in(&ws, &[]).expect_code(0);
    assert_eq!(kept(&ws)["scope"], "mcp:tools", "the challenge's scope");

    let run = ws.run();
    run.expect(2, Some("AUTHORIZATION_REQUIRED"));
    let error = &run.json()["error"];
    let plan = ws.path("plan.json");
    let advice = format!("engine login {} fx --scope 'mcp:tools mcp:write'", plan.display());
    assert_eq!(error["details"]["advice"], advice.as_str(), "{}", run.describe());
    assert_eq!(error["details"]["scope"], "mcp:tools mcp:write");
    let refused: Vec<Value> = servers.auth_log().into_iter().filter(|e| e["method"] == "tools/call").collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["refused"], "insufficient_scope");
    assert!(servers.received("tools/call").is_empty(), "refused before anything was done");
    assert_eq!(ws.task_state("T1"), "pending", "not failed: it goes again after the login");
    let a = ws.attempts();
    assert_eq!((a.len(), a[0].state.as_str(), a[0].class()), (1, "failed", "environment"), "{a:?}");
    assert_eq!(a[0].rule(), "insufficient_scope");
    let receipt = ws.receipt_of(a[0].id).unwrap();
    assert_eq!(receipt["step_up_scope"], "mcp:tools mcp:write", "{receipt}");

    let login = log_in(&ws, &["--scope", "mcp:tools mcp:write"]);
    login.expect_code(0);
    let authorize: Vec<Value> =
        servers.lines("as.jsonl").into_iter().filter(|e| e["endpoint"] == "authorize").collect();
    assert_eq!(authorize.last().unwrap()["scope"], "mcp:tools mcp:write", "{authorize:?}");

    ws.run().expect(0, None);
    assert_eq!(servers.received("tools/call").len(), 1, "the call went once");
    assert_eq!(ws.mcp_deliveries().len(), 1, "and was done once");
    let a = ws.attempts();
    assert_eq!((a.len(), a[1].state.as_str()), (2, "succeeded"), "{a:?}");
}

/// Issue 40: a pre-registered confidential client whose secret the plan
/// names by a file in the workspace. The authorization server takes only
/// `client_secret_basic` and checks the id and secret, each form-encoded
/// (the secret holds `:`, `+`, `%` and `/`), on every token request: a
/// wrong secret is refused (`invalid_client`) and nothing is kept; the
/// right one logs in, and the run's refresh proves the client again with
/// the secret kept beside the tokens. The secret is in the 0600 token
/// file and the person's own file, nowhere else: not in the plan, the
/// store, nor anything the engine printed.
#[test]
fn a_pre_registered_clients_secret_named_by_a_file_goes_by_basic_and_is_kept_beside_the_tokens_only() {
    const SECRET: &str = "pre:reg+secret%2F/x";
    let ws = Ws::new();
    let flags = ["--client-id", "notes-cli", "--client-secret", SECRET, "--no-registration", "--expires-in", "1"];
    let servers = Servers::start(&ws, &flags, &[]);
    let oauth = json!({"client_id": "notes-cli", "client_secret": {"file": "secrets/notes"}});
    ws.write_plan("plan.json", &servers.plan(oauth));

    ws.write("secrets/notes", "not-the-secret\n");
    let (mut running, url) = login(&ws, &[]);
    let (status, location, _) = get(&url);
    assert_eq!(status, 302, "{url}");
    let _ = get(&location.expect("a redirect"));
    let refused = running.wait(Duration::from_secs(60));
    refused.expect(2, Some("OAUTH_REFUSED"));
    assert!(refused.stdout.contains("invalid_client"), "the server's word: {}", refused.describe());
    assert!(
        !ws.state_home().join("engine/oauth").exists()
            || std::fs::read_dir(ws.state_home().join("engine/oauth")).unwrap().next().is_none(),
        "nothing kept"
    );
    let tried = servers.token_requests();
    assert_eq!((tried.len(), tried[0]["client_auth"].as_str()), (1, Some("basic")), "{tried:?}");
    assert_eq!(tried[0]["checks"]["client_secret"], false);

    ws.write("secrets/notes", format!("{SECRET}\n"));
    let login = log_in(&ws, &[]);
    login.expect_code(0);
    assert!(
        login.stderr.contains("is read from file") && login.stderr.contains("client_secret_basic"),
        "{}",
        login.describe()
    );
    assert_eq!(kept(&ws)["client_id"], "notes-cli");
    std::thread::sleep(Duration::from_millis(1100));
    let run = ws.run();
    run.expect(0, None);
    let tokens = servers.token_requests();
    let grants: Vec<&str> = tokens.iter().filter_map(|t| t["grant_type"].as_str()).collect();
    assert_eq!(grants, ["authorization_code", "authorization_code", "refresh_token"], "{tokens:?}");
    for t in &tokens[1..] {
        assert_eq!((t["client_auth"].as_str(), &t["checks"]["client_secret"]), (Some("basic"), &json!(true)), "{t}");
    }
    assert_eq!(servers.received("tools/call").len(), 1);

    use std::os::unix::fs::PermissionsExt;
    let holds =
        |p: &std::path::Path| std::fs::read(p).is_ok_and(|b| b.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    let token_files: Vec<PathBuf> =
        std::fs::read_dir(ws.state_home().join("engine/oauth")).unwrap().flatten().map(|e| e.path()).collect();
    let keeping: Vec<&PathBuf> = token_files.iter().filter(|p| holds(p)).collect();
    assert_eq!(keeping.len(), 1, "kept beside the tokens: {token_files:?}");
    assert_eq!(std::fs::metadata(keeping[0]).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!holds(&ws.path("plan.json")), "the plan names the file only");
    for f in std::fs::read_dir(ws.store_dir()).unwrap().flatten() {
        assert!(!holds(&f.path()), "the secret in the store: {:?}", f.path());
    }
    let log = ws.engine(&["log", "--json"]);
    let report = ws.engine(&["report", "--json"]);
    let explain = ws.engine(&["explain", "T1", "--json"]);
    for (i, text) in [&login.stdout, &login.stderr, &refused.stdout, &refused.stderr, &run.stdout, &run.stderr]
        .into_iter()
        .chain([&log.stdout, &log.stderr, &report.stdout, &explain.stdout])
        .enumerate()
    {
        assert!(!text.contains(SECRET), "the secret in output #{i}");
    }
}

#[test]
fn an_expired_token_is_refreshed_and_the_rotated_refresh_token_kept() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &["--expires-in", "1", "--refreshed-expires-in", "1"], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    log_in(&ws, &[]).expect_code(0);
    let first = kept(&ws);
    std::thread::sleep(Duration::from_millis(1100));

    ws.run().expect(0, None);
    let second = kept(&ws);
    let refreshes: Vec<Value> =
        servers.token_requests().into_iter().filter(|t| t["grant_type"] == "refresh_token").collect();
    assert!(!refreshes.is_empty(), "refreshed");
    assert!(refreshes.iter().all(|r| r["resource"] == servers.url.as_str() && r["checks"]["refresh_token"] == true));
    assert_ne!(first["refresh_token"], second["refresh_token"], "the rotated refresh token is kept");
    let call = servers.auth_log().into_iter().find(|e| e["method"] == "tools/call").unwrap();
    assert!(call.get("refused").is_none(), "{call}");
    assert_ne!(call["token"], first["access_token"], "the call used a refreshed token");

    // The old refresh token is spent at the server; the kept one works:
    // another goal's run refreshes with it.
    std::thread::sleep(Duration::from_millis(1100));
    let mut again = servers.plan(json!({}));
    again["goal"]["id"] = json!("obs-again");
    ws.write_plan("again.json", &again);
    ws.engine_json(&["run", "again.json"]).expect(0, None);
    let last = servers.token_requests().into_iter().last().unwrap();
    assert_eq!(
        (last["grant_type"].as_str(), last["checks"]["refresh_token"].as_bool()),
        (Some("refresh_token"), Some(true))
    );
    assert_eq!(servers.received("tools/call").len(), 2);
}

#[test]
fn a_401_after_a_refresh_stops_before_any_call() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    log_in(&ws, &[]).expect_code(0);
    std::fs::write(servers.side.join("reject"), "").unwrap();
    let run = ws.run();
    run.expect(2, Some("AUTHORIZATION_REQUIRED"));
    assert!(run.stdout.contains("401") && run.stdout.contains("engine login"), "{}", run.describe());
    let refreshes = servers.token_requests().into_iter().filter(|t| t["grant_type"] == "refresh_token").count();
    assert_eq!(refreshes, 1, "one refresh, then stop");
    assert!(servers.received("tools/call").is_empty(), "no call");
    assert_eq!(ws.attempt_count(), 0);
}

#[test]
fn a_redirect_with_another_state_is_refused_and_nothing_kept() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    let (mut running, url) = login(&ws, &[]);
    let redirect = query(&url, "redirect_uri");
    let (status, _, _) = get(&format!("{redirect}?code=forged&state=not-the-one"));
    assert_eq!(status, 400);
    let out = running.wait(Duration::from_secs(30));
    out.expect(2, Some("OAUTH_REFUSED"));
    assert!(out.stdout.contains("`state`"), "{}", out.describe());
    assert!(!ws.state_home().join("engine/oauth").exists(), "no token kept");
    assert!(servers.token_requests().is_empty(), "the forged code was never exchanged");
}

#[test]
fn the_authorization_server_verifies_pkce_a_wrong_verifier_fails() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &["--client-id", "pre"], &[]);
    // What the engine's login proves right, done wrong by hand.
    let verifier = "a-verifier-with-enough-characters-to-be-a-valid-pkce-verifier";
    let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"; // of RFC 7636's verifier, not this one
    let authorize = format!(
        "{}/authorize?response_type=code&client_id=pre&redirect_uri=http://127.0.0.1:9/cb&state=s\
         &code_challenge={challenge}&code_challenge_method=S256&resource={}",
        servers.issuer, servers.url
    );
    let (status, location, _) = get(&authorize);
    assert_eq!(status, 302);
    let code = query(&location.unwrap(), "code");
    let body = format!(
        "grant_type=authorization_code&code={code}&client_id=pre&redirect_uri=http://127.0.0.1:9/cb\
         &code_verifier={verifier}&resource={}",
        servers.url
    );
    let port = servers.issuer.rsplit(':').next().unwrap().parse().unwrap();
    let (status, answer) =
        http(port, "POST", "/token", Some(&body), &[("Content-Type", "application/x-www-form-urlencoded")]);
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("invalid_grant") && answer.contains("pkce"), "{answer}");

    // The engine's own login with the same server succeeds: its S256 is right.
    ws.write_plan("plan.json", &servers.plan(json!({"client_id": "pre"})));
    let out = log_in(&ws, &[]);
    out.expect_code(0);
    assert_eq!(out.json()["registered"], false, "a client_id in the plan is used as it is");
    assert_eq!(servers.token_requests().last().unwrap()["checks"]["pkce"], true);
}

#[test]
fn metadata_for_another_resource_or_a_token_endpoint_off_the_issuer_is_refused() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &[], &["--oauth-resource", "http://127.0.0.1:1/elsewhere"]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    let out = ws.engine_json(&["login", "plan.json", "fx", "--timeout", "5"]);
    out.expect(2, Some("OAUTH_METADATA_INVALID"));
    assert!(out.stdout.contains("not this server"), "{}", out.describe());
    drop(servers);

    let ws = Ws::new();
    let servers = Servers::start(&ws, &["--token-endpoint-origin", "http://127.0.0.2:9"], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    let out = ws.engine_json(&["login", "plan.json", "fx", "--timeout", "5"]);
    out.expect(2, Some("OAUTH_METADATA_INVALID"));
    assert!(out.stdout.contains("token_endpoint") && out.stdout.contains("not on its issuer"), "{}", out.describe());
    assert!(servers.lines("as.jsonl").is_empty(), "nothing was asked of it");
}

#[test]
fn without_a_client_id_or_a_registration_endpoint_login_is_refused() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &["--no-registration"], &[]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    let out = ws.engine_json(&["login", "plan.json", "fx", "--timeout", "5"]);
    out.expect(2, Some("OAUTH_REFUSED"));
    assert!(out.stdout.contains("registration_endpoint"), "{}", out.describe());
    assert!(servers.lines("as.jsonl").is_empty(), "nothing was asked of it");
}

/// A 401 that names no metadata (RFC 9728's well-known URI is tried) and an
/// authorization server with OpenID discovery only.
#[test]
fn the_well_known_uri_and_openid_discovery_are_the_fallbacks() {
    let ws = Ws::new();
    let servers = Servers::start(&ws, &["--oidc-only"], &["--bare-challenge"]);
    ws.write_plan("plan.json", &servers.plan(json!({})));
    log_in(&ws, &[]).expect_code(0);
    ws.run().expect(0, None);
    assert_eq!(servers.received("tools/call").len(), 1);
}
