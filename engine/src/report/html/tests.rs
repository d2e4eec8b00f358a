//! The renderer on documents built here (no ledger): escaping, the
//! policy that forbids fetches, and determinism.

use serde_json::json;

use super::render;
use crate::evidence::Evidence;
use crate::report::document::testdoc::{attempt, doc, output, task};
use crate::report::document::*;

const HOSTILE: &str = "<script>alert(1)</script>\n</script><img src=x onerror=alert(2)>\n\x1b]0;title\x07\x1b[31mred";

#[test]
fn provider_markup_and_terminal_escapes_are_text_in_the_page() {
    let mut t = task("<b>T1</b>", &[], "failed", vec![attempt(1, "failed", HOSTILE)]);
    t.attempts[0].claims.push(ClaimLine {
        id: 1,
        authority: "external_ai_message".into(),
        data: json!({"summary": "</script><script>x()</script>"}),
        verified: false,
    });
    t.why = Some("why </script>".into());
    let page = render(&doc(vec![t]));
    // Exactly one script element and one end tag: ours.
    assert_eq!(page.matches("<script").count(), 1, "a second script element");
    assert_eq!(page.matches("</script").count(), 1, "a second script end tag");
    assert_eq!(page.matches("<img").count(), 0);
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("&lt;b&gt;T1&lt;/b&gt;"));
    assert!(page.contains(
        r#"<span class="ctl">\x1b</span>]0;title<span class="ctl">\x07</span><span class="ctl">\x1b</span>[31mred"#
    ));
    assert!(!page.contains('\x1b') && !page.contains('\x07'), "a raw control byte in the page");
    assert!(page.contains("not verified"));
}

#[test]
fn the_page_can_fetch_nothing() {
    let page = render(&doc(vec![task("T1", &[], "succeeded", vec![attempt(1, "succeeded", "ok")])]));
    let csp = page
        .split("Content-Security-Policy\" content=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a CSP meta");
    assert!(csp.starts_with("default-src 'none'; "), "{csp}");
    assert!(csp.contains("img-src 'none'") && csp.contains("base-uri 'none'") && csp.contains("form-action 'none'"));
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    // Script and style run under the nonce the policy names.
    let nonce = csp.split("'nonce-").nth(1).and_then(|s| s.split('\'').next()).unwrap();
    assert!(
        page.contains(&format!("<script nonce=\"{nonce}\">")) && page.contains(&format!("<style nonce=\"{nonce}\">"))
    );
    for needle in ["src=", "http://", "https://", "@import", "//fonts", "<link", "<iframe", "<object", "<embed"] {
        assert!(!page.contains(needle), "the page holds {needle:?}");
    }
    let urls: Vec<&str> = page.match_indices("url(").map(|(i, _)| &page[i..i + 11]).collect();
    assert!(urls.iter().all(|u| *u == "url(#arrow)"), "{urls:?}");
}

#[test]
fn the_assets_cannot_close_their_own_elements() {
    assert!(!super::JS.to_lowercase().contains("</script"));
    assert!(!super::CSS.to_lowercase().contains("</style"));
    assert!(
        !super::JS.contains("innerHTML") && !super::JS.contains("insertAdjacentHTML") && !super::JS.contains("eval(")
    );
}

#[test]
fn the_same_document_gives_the_same_bytes_and_another_another_nonce() {
    let d = doc(vec![
        task("A", &[], "succeeded", vec![attempt(1, "succeeded", "one")]),
        task("B", &["A"], "succeeded", vec![attempt(2, "succeeded", "two")]),
    ]);
    assert_eq!(render(&d), render(&d));
    let mut other = d.clone();
    other.tasks[1].attempts[0].evidence[0].evidence = Evidence::ProcessExit {
        exit: None,
        timed_out: false,
        duration_ms: 1,
        stdout: output("three"),
        stderr: output(""),
    };
    let nonce = |p: &str| p.split("'nonce-").nth(1).map(|s| s[..32].to_string());
    assert_ne!(nonce(&render(&d)), nonce(&render(&other)));
}

#[test]
fn settlements_and_approvals_say_who_and_are_not_verified() {
    let mut t = task("T1", &[], "running", vec![attempt(1, "settled_ok", "")]);
    t.attempts[0].settlement = Some(SettlementLine {
        outcome: "ok".into(),
        actor: "<mallory>".into(),
        note: "seen in the log".into(),
        at_ms: 5_000,
        evidence_blob: None,
        verified_by_engine: false,
        store_tampered: None,
    });
    t.approvals.push(ApprovalLine {
        id: 7,
        operation_id: "op_1".into(),
        revision: 1,
        request_digest: "d".into(),
        actor: "alice".into(),
        note: "ok & go".into(),
        at_ms: 900,
        consumed_by: Some(1),
        voided_by: None,
        store_tampered: None,
        expires_at_ms: None,
        expired: false,
        expires_in: None,
    });
    // An approval past its time, never spent: the page says so.
    t.approvals.push(ApprovalLine {
        id: 8,
        operation_id: "op_2".into(),
        revision: 1,
        request_digest: "d".into(),
        actor: "alice".into(),
        note: "for a moment".into(),
        at_ms: 900,
        consumed_by: None,
        voided_by: None,
        store_tampered: None,
        expires_at_ms: Some(2_000),
        expired: true,
        expires_in: None,
    });
    let page = render(&doc(vec![t]));
    assert!(page.contains("expired at ") && page.contains("never spent"), "{page}");
    assert!(page.contains("settled ok</b> by &lt;mallory&gt;"));
    assert!(
        page.contains("a person&#39;s word, not verified by the engine")
            || page.contains("a person's word, not verified by the engine")
    );
    assert!(page.contains("<td>alice</td>") && page.contains("ok &amp; go") && page.contains("consumed by attempt 1"));
}

#[test]
fn an_act_row_off_the_chain_is_shown_as_store_tampered_never_as_an_act() {
    let mut t = task("T1", &[], "awaiting_approval", Vec::new());
    let words =
        "STORE_TAMPERED: approvals row 7 is not on the act chain: it was written by something other than the engine";
    t.approvals.push(ApprovalLine {
        id: 7,
        operation_id: "op_1".into(),
        revision: 1,
        request_digest: "d".into(),
        actor: "root".into(),
        note: "forged".into(),
        at_ms: 900,
        consumed_by: None,
        voided_by: None,
        store_tampered: Some(words.into()),
        expires_at_ms: None,
        expired: false,
        expires_in: None,
    });
    let mut d = doc(vec![t]);
    let page = render(&d);
    assert!(page.contains(words), "the approvals table names it");
    assert!(!page.contains("not used yet"), "never shown as an approval waiting for its call");
    d.store_tampered.push(TamperedRow {
        code: "STORE_TAMPERED".into(),
        row: "approvals row 7".into(),
        problem: "is not on the act chain".into(),
        words: words.into(),
    });
    let page = render(&d);
    assert!(page.contains("<section id=\"tampered\""), "a banner before the tasks");
    assert!(page.find("id=\"tampered\"") < page.find("id=\"waiting\""));
}

#[test]
fn a_goal_without_acceptance_checks_never_says_every_check_passed() {
    let mut d = doc(vec![task("T1", &[], "succeeded", vec![attempt(1, "succeeded", "")])]);
    d.goal.state = "satisfied".into();
    (d.goal.claims, d.goal.does_not_claim) = words::goal_words("satisfied", 0, &[], false, &[]);
    let page = render(&d);
    assert!(!page.contains("every acceptance check passed"));
    assert!(page.contains("nothing checks the goal itself"));
}
