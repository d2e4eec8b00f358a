//! The plan cache: what a plan load derives from a plan file's bytes alone
//! — its structural validation, the dependency order and every digest —
//! kept in the ledger beside the revision those bytes were registered as,
//! so a re-run of the same bytes skips that work.
//!
//! The key is a BLAKE3 of the file's exact bytes and of this engine's
//! build (another build may validate or digest differently): a changed
//! byte is another key, and a plan with another key takes the full path —
//! parse, every check, every digest. A row is sealed (a keyed BLAKE3 of
//! its key, goal, revision and body), so an edit of one of its fields —
//! its key set to a changed plan's, say — breaks the seal, and the row is
//! ignored (the full path decides). What the seal cannot do, like the act
//! chain (`store::chain`): without a secret, a process that can write the
//! store can also write a new sealed row; the sandbox keeps providers from
//! writing the store. Pure: building a row and judging one.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::digests::{PlanDigests, TaskDigests};
use super::model::PlanFile;
use crate::digest::{Digester, Kind};
use crate::ids::{GoalId, OperationId, RequestDigest, Revision};

/// One row of the cache, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedPlan {
    /// `file_key` of the plan file's bytes.
    pub key: String,
    pub goal_id: GoalId,
    pub revision: Revision,
    /// The derived facts (`Body`), as JSON.
    pub body: String,
    pub seal: String,
}

/// `Body` as it is written: borrowed from the plan's digests, no copy.
#[derive(Serialize)]
struct BodyRef<'a> {
    plan: &'a str,
    goal_contract: &'a str,
    order: &'a [usize],
    tasks: Vec<[&'a str; 6]>,
}

/// What the full path derived from the bytes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    plan: String,
    goal_contract: String,
    /// Task indices, dependencies first.
    order: Vec<usize>,
    /// Per task, in the file's order: ref, meaning, meaning without the
    /// validations, dependencies, request digest, operation id.
    tasks: Vec<[String; 6]>,
}

/// The cache key of a plan file's bytes, under this engine's build: its
/// version line (version and commit) and a hash of the sources that decide
/// a plan's validity and digests (`build.rs`).
pub fn file_key(bytes: &[u8]) -> String {
    Digester::new(Kind::PlanFile)
        .str("engine", env!("ENGINE_VERSION_LINE"))
        .str("sources", env!("ENGINE_PLAN_SOURCES"))
        .bytes("plan", bytes)
        .finish()
}

fn seal(key: &str, goal_id: &GoalId, revision: Revision, body: &str) -> String {
    Digester::new(Kind::PlanCacheSeal)
        .str("key", key)
        .str("goal", goal_id.as_str())
        .str("revision", &revision.get().to_string())
        .str("body", body)
        .finish()
}

impl CachedPlan {
    /// The row for a plan that passed the full path.
    pub fn new(key: &str, revision: Revision, file: &PlanFile, order: &[usize], digests: &PlanDigests) -> CachedPlan {
        let tasks = file
            .tasks
            .iter()
            .map(|t| match digests.tasks.get(&t.task_ref) {
                Some(d) => [
                    t.task_ref.as_str(),
                    &d.meaning,
                    &d.meaning_core,
                    &d.dependencies,
                    d.request.as_str(),
                    d.operation_id.as_str(),
                ],
                None => [t.task_ref.as_str(), "", "", "", "", ""],
            })
            .collect();
        let body = BodyRef { plan: &digests.plan, goal_contract: &digests.goal_contract, order, tasks };
        let body = serde_json::to_string(&body).unwrap_or_default();
        let goal_id = GoalId::new(file.goal.as_ref().map_or("", |g| g.id.as_str()));
        CachedPlan { key: key.to_string(), seal: seal(key, &goal_id, revision, &body), goal_id, revision, body }
    }

    /// The order and digests this row holds for `file`, parsed from bytes
    /// whose key is `key` — `None` unless the seal holds, the key is
    /// `key`, the goal is `file`'s and every task is where the row says.
    pub fn derived(&self, key: &str, file: &PlanFile) -> Option<(Vec<usize>, PlanDigests)> {
        if self.key != key || self.seal != seal(&self.key, &self.goal_id, self.revision, &self.body) {
            return None;
        }
        if file.goal.as_ref().map(|g| g.id.as_str()) != Some(self.goal_id.as_str()) {
            return None;
        }
        let body: Body = serde_json::from_str(&self.body).ok()?;
        let n = file.tasks.len();
        if body.tasks.len() != n || body.order.len() != n || body.order.iter().any(|&i| i >= n) {
            return None;
        }
        let mut tasks = HashMap::with_capacity(n);
        for (task, [task_ref, meaning, meaning_core, dependencies, request, operation_id]) in
            file.tasks.iter().zip(body.tasks)
        {
            if task.task_ref != task_ref {
                return None;
            }
            let d = TaskDigests {
                meaning,
                meaning_core,
                dependencies,
                request: RequestDigest::new(request),
                operation_id: OperationId::new(operation_id),
            };
            tasks.insert(task_ref, d);
        }
        Some((body.order, PlanDigests { plan: body.plan, goal_contract: body.goal_contract, tasks }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(action: &str) -> (Vec<u8>, PlanFile) {
        let text = format!(
            r#"{{"version":1,"goal":{{"id":"g","statement":"s"}},"providers":{{"p":{{"kind":"command"}}}},
            "tasks":[{{"ref":"a","provider":"p","action":{{"run":["{action}"]}}}},
                     {{"ref":"b","provider":"p","depends_on":["a"],"action":{{"run":["true"]}}}}]}}"#
        );
        let file = crate::plan::load::parse_plan(text.as_bytes(), "p.json").unwrap();
        (text.into_bytes(), file)
    }

    fn row(bytes: &[u8], file: &PlanFile) -> (CachedPlan, PlanDigests) {
        let digests = PlanDigests::compute(file);
        (CachedPlan::new(&file_key(bytes), Revision(3), file, &[0, 1], &digests), digests)
    }

    #[test]
    fn a_row_gives_back_what_the_full_path_derived() {
        let (bytes, file) = plan("true");
        let (cached, digests) = row(&bytes, &file);
        let (order, back) = cached.derived(&file_key(&bytes), &file).unwrap();
        assert_eq!(order, vec![0, 1]);
        assert_eq!(back.plan, digests.plan);
        assert_eq!(back.goal_contract, digests.goal_contract);
        for (r, d) in &digests.tasks {
            let b = &back.tasks[r];
            assert_eq!((&b.meaning, &b.meaning_core, &b.dependencies), (&d.meaning, &d.meaning_core, &d.dependencies));
            assert_eq!((&b.request, &b.operation_id), (&d.request, &d.operation_id));
        }
    }

    #[test]
    fn one_changed_byte_is_another_key() {
        let (bytes, _) = plan("true");
        let (other, _) = plan("truE");
        assert_eq!(bytes.len(), other.len());
        assert_ne!(file_key(&bytes), file_key(&other));
    }

    #[test]
    fn an_edited_row_is_not_trusted() {
        let (bytes, file) = plan("true");
        let (changed_bytes, changed) = plan("false");
        let (cached, _) = row(&bytes, &file);
        // Its key set to the changed plan's: the seal no longer holds.
        let forged = CachedPlan { key: file_key(&changed_bytes), ..cached.clone() };
        assert!(forged.derived(&file_key(&changed_bytes), &changed).is_none());
        // Its body or revision edited: the same.
        let body = cached.body.replace(&cached.body[10..20], "0000000000");
        assert!(CachedPlan { body, ..cached.clone() }.derived(&cached.key, &file).is_none());
        assert!(CachedPlan { revision: Revision(4), ..cached.clone() }.derived(&cached.key, &file).is_none());
        // Asked for other bytes than its own: no.
        assert!(cached.derived(&file_key(&changed_bytes), &file).is_none());
    }
}
