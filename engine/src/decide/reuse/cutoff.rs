//! Early cutoff (SPEC.md "Additions (2026-12-06)", `UPSTREAM_OUTPUT_UNCHANGED`):
//! a dependant's checkpoint carries, for each dependency that can cut off,
//! the digest of that dependency's recorded outputs (`upstream:<ref>`). So
//! what a dependant stands on is the bytes its upstream left, not the fact
//! that the upstream ran: an upstream that ran again and left byte-identical
//! outputs keeps its dependants' completions. An upstream with an `external`
//! effect, or one that declares no `outputs`, cuts nothing off: what it
//! changed is not in the ledger to compare. Pure: the run reads the ledger.

use crate::digest::{Digester, Kind};
use crate::plan::model::{Effect, Task};

use super::Refusal;

/// The checkpoint context name of a dependency's recorded outputs.
pub fn context_name(dependency: &str) -> String {
    format!("upstream:{dependency}")
}

/// The dependency a checkpoint context name is about, if it is one.
pub fn dependency_of(context_name: &str) -> Option<&str> {
    context_name.strip_prefix("upstream:")
}

/// Why an upstream's run again cuts nothing off below it; `None` when it
/// can (it declares `outputs` and its effect is not `external`).
pub fn why_no_cutoff(upstream: &Task) -> Option<&'static str> {
    if upstream.effect == Effect::External {
        return Some("no early cutoff: it has an external effect, which its outputs do not show");
    }
    if upstream.outputs.is_empty() {
        return Some("no early cutoff: it declares no `outputs` to compare");
    }
    None
}

/// Why the upstreams that run again (`moving`, without those put off)
/// cut nothing off below them: the first that cannot (`why_no_cutoff`),
/// as its dependant's refusal; `None`: each one can. `task`: a ref's task.
pub fn no_cutoff<'a, 't>(
    moving: impl IntoIterator<Item = &'a String>,
    task: impl Fn(&str) -> Option<&'t Task>,
) -> Option<Refusal> {
    moving.into_iter().find_map(|d| {
        let why = why_no_cutoff(task(d)?)?;
        Some(Refusal::UpstreamNotReused { dependency: d.clone(), why: Some(why.into()) })
    })
}

/// The value `upstream:<ref>` carries: the digest of the outputs the
/// dependency's completion recorded, each (path, content digest,
/// executable), in path order; `"none"` when it has no completion.
pub fn outputs_digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a str, bool)>) -> String {
    let mut files: Vec<(&str, &str, bool)> = files.into_iter().collect();
    files.sort();
    let listed: Vec<serde_json::Value> =
        files.into_iter().map(|(path, digest, x)| serde_json::json!([path, digest, x])).collect();
    Digester::new(Kind::UpstreamOutputs).json("outputs", &serde_json::Value::Array(listed)).finish()
}

/// A refusal as a person reads it: a checkpoint whose first difference is
/// an upstream's outputs is that upstream's re-run, with changed outputs.
pub fn named(refusal: Refusal) -> Refusal {
    match refusal {
        Refusal::CheckpointChanged { path } => match path.strip_prefix("context:").and_then(dependency_of) {
            Some(dep) => Refusal::UpstreamNotReused {
                dependency: dep.to_string(),
                why: Some("its recorded outputs changed".into()),
            },
            None => Refusal::CheckpointChanged { path },
        },
        other => other,
    }
}

/// A reuse on condition (`engine revise`'s `early_cutoff_on`), in words:
/// what it waits on. `None`: no condition.
pub fn condition_words(upstreams: &[String]) -> Option<String> {
    (!upstreams.is_empty()).then(|| {
        format!(
            "kept only if {} come{} out with byte-identical outputs (early cutoff), else it runs",
            upstreams.join(", "),
            if upstreams.len() == 1 { "s" } else { "" }
        )
    })
}

/// Is a task recorded `reused` still reused on condition — `engine
/// revise` made it wait on its upstreams' outputs (`early_cutoff_on` in
/// its row), and no run has kept it since (`kept`: a `completion_kept`
/// event of the revision names it)? Its upstreams, if so. A run that
/// found them changed made it pending: no longer `reused`.
pub fn waits_on(detail: &serde_json::Value, kept: bool) -> Option<Vec<String>> {
    let on: Vec<String> =
        detail.get("early_cutoff_on")?.as_array()?.iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
    (!on.is_empty() && !kept).then_some(on)
}

/// What a kept completion's event says (`UPSTREAM_OUTPUT_UNCHANGED`):
/// the upstream tasks that ran again, and those kept by early cutoff.
pub fn kept_words(ran: &[String], kept: &[String]) -> String {
    let mut why = Vec::new();
    if !ran.is_empty() {
        why.push(format!("{} ran again with byte-identical outputs", ran.join(", ")));
    }
    if !kept.is_empty() {
        why.push(format!("{} kept by early cutoff", kept.join(", ")));
    }
    if why.is_empty() {
        why.push("its upstream is complete again".into());
    }
    format!(
        "{}: the outputs and inputs this completion stands on are unchanged, so it is kept (early cutoff)",
        why.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(effect: &str, outputs: &[&str]) -> Task {
        serde_json::from_value(serde_json::json!({
            "ref": "T1", "provider": "sh", "action": {"run": ["true"]}, "effect": effect, "outputs": outputs,
        }))
        .unwrap()
    }

    #[test]
    fn only_a_local_upstream_with_outputs_cuts_off() {
        assert_eq!(why_no_cutoff(&task("local", &["out.txt"])), None);
        assert!(why_no_cutoff(&task("local", &[])).unwrap().contains("no `outputs`"));
        assert!(why_no_cutoff(&task("external", &["out.txt"])).unwrap().contains("external"));
    }

    #[test]
    fn the_first_upstream_that_cannot_cut_off_is_named() {
        let tasks = std::collections::HashMap::from([
            ("A", task("local", &["a.txt"])),
            ("B", task("local", &[])),
            ("C", task("external", &["c.txt"])),
        ]);
        let lookup = |r: &str| tasks.get(r);
        let moving = |refs: &[&str]| refs.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        assert_eq!(no_cutoff(&moving(&["A"]), lookup), None);
        assert_eq!(no_cutoff(&moving(&[]), lookup), None);
        let r = no_cutoff(&moving(&["A", "C", "B"]), lookup).unwrap();
        assert_eq!(r.code(), "UPSTREAM_NOT_REUSED");
        assert!(r.detail().contains('C') && r.detail().contains("external"), "{}", r.detail());
        // A ref the plan does not hold cannot say why.
        assert_eq!(no_cutoff(&moving(&["Z"]), lookup), None);
    }

    #[test]
    fn the_outputs_digest_is_of_the_files_not_their_order() {
        let a = outputs_digest([("a", "d1", false), ("b", "d2", true)]);
        assert_eq!(a, outputs_digest([("b", "d2", true), ("a", "d1", false)]));
        assert_ne!(a, outputs_digest([("a", "d1", false), ("b", "d3", true)]));
        assert_ne!(a, outputs_digest([("a", "d1", false), ("b", "d2", false)]));
        assert_ne!(a, outputs_digest([("a", "d1", false)]));
    }

    #[test]
    fn a_reuse_on_condition_waits_until_a_run_keeps_it() {
        let detail = serde_json::json!({"reused_from": {}, "early_cutoff_on": ["T1", "T3"]});
        assert_eq!(waits_on(&detail, false), Some(vec!["T1".to_string(), "T3".to_string()]));
        assert_eq!(waits_on(&detail, true), None, "kept since: plainly reused");
        assert_eq!(waits_on(&serde_json::json!({"reused_from": {}}), false), None);
        assert_eq!(
            condition_words(&["T1".into()]).unwrap(),
            "kept only if T1 comes out with byte-identical outputs (early cutoff), else it runs"
        );
        assert_eq!(condition_words(&[]), None);
    }

    #[test]
    fn a_changed_upstream_context_reads_as_that_upstreams_rerun() {
        let r = named(Refusal::CheckpointChanged { path: "context:upstream:T1".into() });
        assert_eq!(r.code(), "UPSTREAM_NOT_REUSED");
        assert!(r.detail().contains("T1") && r.detail().contains("outputs changed"), "{}", r.detail());
        let r = named(Refusal::CheckpointChanged { path: "a.txt".into() });
        assert_eq!(r, Refusal::CheckpointChanged { path: "a.txt".into() });
    }
}
