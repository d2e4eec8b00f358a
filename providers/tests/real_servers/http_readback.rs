//! HTTP read-back against the receiver fixture: a POSTed note read back
//! with GET; present, absent only where declared, inconclusive otherwise.

use providers::http::HttpProvider;
use providers::{Decider, Provider, Verdict};
use serde_json::json;

use crate::support::*;

fn rule(base: &str) -> serde_json::Value {
    json!({"url": format!("{base}/notes/{{operation_id}}"),
           "present_if": {"status": [200], "json": {"/body/text": "hello {operation_id}", "/key": "{operation_id}"}},
           "absent_if": {"status": [404]}})
}

#[tokio::test]
async fn read_back_present_absent_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = receiver(&dir.path().join("deliveries.jsonl")).await;
    let note = |op: &str| {
        let p = HttpProvider::new(format!("{base}/notes/{op}"));
        (p, call(dir.path(), op, json!({"body": {"text": format!("hello {op}")}})))
    };
    let (p, sent) = note("n1");
    assert_eq!(http_receipt(go(&p, &sent).await.0).status, 200);

    let r = p.read_back(&sent, Some(&rule(&base))).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Present, Decider::PresentIf), "{r:?}");
    assert_eq!(r.request, json!({"method": "GET", "url": format!("{base}/notes/n1")}));
    assert_eq!(r.answer["status"], 200);
    assert!(r.summary().contains("by present_if"), "{}", r.summary());

    // Never sent: 404, declared absence.
    let (p2, never) = note("n2");
    let r = p2.read_back(&never, Some(&rule(&base))).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Absent, Decider::AbsentIf), "{r:?}");

    // The same 404 where the rule does not declare it: inconclusive.
    let mut undeclared = rule(&base);
    undeclared.as_object_mut().unwrap().remove("absent_if");
    let r = p2.read_back(&never, Some(&undeclared)).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NeitherMatched), "{r:?}");
    // A provider-level bare observe URL means the same since rules exist.
    let bare = HttpProvider::from_config(&json!({"kind": "http", "endpoint": format!("{base}/notes/n2"),
                                                 "observe": format!("{base}/notes/{{operation_id}}")}))
    .unwrap();
    assert!(matches!(bare.observe(&never).unwrap().await, providers::Observation::Inconclusive { .. }));

    // Something else is there (another try's text): neither rule matches.
    let (p3, other) = note("n3");
    let mut wrong = other.clone();
    wrong.request = json!({"body": {"text": "something else"}});
    http_receipt(go(&p3, &wrong).await.0);
    let r = p3.read_back(&other, Some(&rule(&base))).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NeitherMatched), "{r:?}");

    // The receiver is gone: no answer, never absence.
    child.kill().await.unwrap();
    let _ = child.wait().await;
    let r = p.read_back(&sent, Some(&rule(&base))).unwrap().await;
    assert_eq!((r.verdict, r.decider), (Verdict::Inconclusive, Decider::NoAnswer), "{r:?}");
    assert!(r.failure.is_some());
}
