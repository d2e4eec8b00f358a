//! The plan's authority outside its providers and tasks: the budgets (above
//! the limits in force, `max_revisions` aside: only `--raise` lifts it),
//! the goal's acceptance checks and constraints (`protect`, `check`), who
//! may act (`people`), and which variables are secrets (redacted).

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::fields::{self, allow_list, narrowing_list};
use super::{push, Before, Change, Kind, Loosening, Place};
use crate::decide::budget::BudgetName;
use crate::decide::raise::{self, Raise};
use crate::plan::model::{Acceptance, Constraint, Goal, People};
use crate::plan::PlanFile;

/// Everything of the plan besides its providers and tasks. The plan file
/// and its goal are destructured whole: a new field does not build until
/// it is placed.
pub fn compare(out: &mut Vec<Loosening>, before: &Before, after: &PlanFile, raised: &[Raise]) {
    let PlanFile {
        // For editors, and the format's version: no authority.
        schema: _,
        version: _,
        goal,
        budgets: _,
        // `providers` and `tasks` have their own comparisons.
        providers: _,
        tasks: _,
        secrets,
        people: new_people,
        approvals,
    } = after;
    expiry(out, before.file.approvals.as_ref(), approvals.as_ref());
    budgets(out, before, after, raised);
    if let (Some(b), Some(a)) = (&before.file.goal, goal) {
        let Goal { id: _, statement: _, acceptance, constraints: now } = a;
        checks_of_acceptance(out, &b.acceptance, acceptance);
        constraints(out, &b.constraints, now);
    }
    people(out, before.file.people.as_ref(), new_people.as_ref());
    let kept = narrowing_list(&before.file.secrets, secrets, "secrets (redacted from every output)");
    push(out, Kind::Secrets, Place::at("$.secrets".into()), (json!(before.file.secrets), json!(secrets)), kept);
}

fn budgets(out: &mut Vec<Loosening>, before: &Before, after: &PlanFile, raised: &[Raise]) {
    for budget in BudgetName::ALL {
        // A plan never lifts its own `max_revisions` (`budgets::in_force`).
        if budget == BudgetName::MaxRevisions {
            continue;
        }
        let (from, to) = (raise::limit_of(before.in_force, budget), raise::limit_of(&after.budgets, budget));
        let covered = raised.iter().any(|r| r.budget == budget && r.to >= to);
        let change = if covered { Change::Same } else { fields::limit(from, to) };
        push(out, Kind::Budget, Place::at(format!("$.budgets.{budget}")), (json!(from), json!(to)), change);
    }
}

/// Each criterion that had a check keeps it as it was (by id).
fn checks_of_acceptance(out: &mut Vec<Loosening>, before: &[Acceptance], after: &[Acceptance]) {
    for b in before.iter().filter(|b| b.check.is_some()) {
        let a = after.iter().find(|a| a.id == b.id);
        let whose = format!("acceptance {}", b.id);
        let change = fields::check(b.check.as_ref(), a.and_then(|a| a.check.as_ref()), &whose);
        let values = (json!(b.check), json!(a.map(|a| &a.check)));
        push(out, Kind::Acceptance, Place::at(format!("$.goal.acceptance[{}].check", b.id)), values, change);
    }
}

fn constraints(out: &mut Vec<Loosening>, before: &[Constraint], after: &[Constraint]) {
    for (i, c) in before.iter().enumerate() {
        let at = format!("$.goal.constraints[{i}]");
        match c {
            Constraint::Statement(s) => {
                if !after.iter().any(|a| matches!(a, Constraint::Statement(t) if t == s)) {
                    let dropped = Change::Loosens("a constraint is dropped".into());
                    push(out, Kind::Constraint, Place::at(at), (json!(s), Value::Null), dropped);
                }
            }
            Constraint::Checked(c) => {
                let Some(now) = after.iter().filter_map(Constraint::checked).find(|a| a.id == c.id) else {
                    let dropped = Change::Loosens(format!("constraint {} is dropped", c.id));
                    push(out, Kind::Constraint, Place::at(at), (json!(c), Value::Null), dropped);
                    continue;
                };
                let noun = format!("constraint {}: protected paths", c.id);
                let protect = narrowing_list(&c.protect, &now.protect, &noun);
                let values = (json!(c.protect), json!(now.protect));
                push(out, Kind::ProtectedPath, Place::at(format!("{at}.protect")), values, protect);
                let check = fields::check(c.check.as_ref(), now.check.as_ref(), &format!("constraint {}", c.id));
                let values = (json!(c.check), json!(now.check));
                push(out, Kind::Constraint, Place::at(format!("{at}.check")), values, check);
            }
        }
    }
}

/// `approvals.expire_after`: dropped, or longer, loosens (an approval then
/// pays for a call later than a person allowed).
fn expiry(
    out: &mut Vec<Loosening>,
    before: Option<&crate::plan::model::Approvals>,
    after: Option<&crate::plan::model::Approvals>,
) {
    let of = |a: Option<&crate::plan::model::Approvals>| a.and_then(|a| a.expire_after.clone());
    let (b, a) = (of(before), of(after));
    let ms = |s: &Option<String>| s.as_deref().map(|s| crate::decide::expiry::parse(s).unwrap_or(u64::MAX));
    let change = match (ms(&b), ms(&a)) {
        (Some(_), None) => {
            Change::Loosens(format!("approvals no longer expire (they did after {})", b.clone().unwrap_or_default()))
        }
        (Some(then), Some(now)) if now > then => Change::Loosens("approvals last longer".into()),
        (None, _) | (Some(_), Some(_)) => Change::Same,
    };
    push(out, Kind::RequiresApproval, Place::at("$.approvals.expire_after".to_string()), (json!(b), json!(a)), change);
}

fn people(out: &mut Vec<Loosening>, before: Option<&People>, after: Option<&People>) {
    let empty = People::default();
    let now = after.unwrap_or(&empty).lists();
    let then = before.unwrap_or(&empty).lists();
    let acts: BTreeSet<&str> = then.iter().map(|(act, _)| *act).collect();
    for act in acts {
        let list = |lists: &[(&str, &[String])]| lists.iter().find(|(k, _)| *k == act).map(|(_, l)| l.to_vec());
        let (b, a) = (list(&then), list(&now));
        let change = allow_list(b.as_deref(), a.as_deref(), &format!("people who may {act}"));
        push(out, Kind::People, Place::at(format!("$.people.{act}")), (json!(b), json!(a)), change);
    }
}
