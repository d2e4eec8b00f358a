//! A person's raise of a budget (`engine revise PLAN --reason TEXT --raise
//! NAME=VALUE`), the budgets in force once raises are applied, and the way
//! out of an exhausted budget, as the exact command to type. Pure.
//!
//! A raise is a person's act, recorded in the ledger (event
//! `budget_raised`); it stands for the goal from then on. A plan never
//! raises `max_revisions` by editing itself: the limit in force is the
//! lowest any recorded revision set, or a person's raise above it.

use serde::{Deserialize, Serialize};

use super::advice;
use super::budget::{BudgetName, Exhausted};
use crate::cost::Cost;
use crate::plan::model::Budgets;

/// One budget raised to a new limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Raise {
    pub budget: BudgetName,
    /// The new limit, in the plan's units (seconds, calls, cost units).
    pub to: f64,
}

/// `NAME=VALUE`, checked: a known budget, and a value the plan could hold
/// (a whole number for counts; a cost counted in millionths).
pub fn parse(arg: &str) -> Result<Raise, String> {
    let (name, value) = arg.split_once('=').ok_or_else(|| format!("`{arg}`: expected NAME=VALUE"))?;
    let budget = BudgetName::parse(name.trim()).ok_or_else(|| {
        let names: Vec<&str> = BudgetName::ALL.iter().map(|b| b.as_str()).collect();
        format!("`{name}` is not a budget (one of {})", names.join(", "))
    })?;
    let value = value.trim();
    let to = match budget {
        BudgetName::MaxCost => {
            let units: f64 = value.parse().map_err(|_| format!("{budget}: `{value}` is not a number"))?;
            Cost::from_units(units).map_err(|e| format!("{budget}: {e}"))?.units()
        }
        BudgetName::MaxAttemptsPerTask | BudgetName::MaxRevisions => {
            value.parse::<u32>().map_err(|_| format!("{budget}: `{value}` is not a whole number up to {}", u32::MAX))?
                as f64
        }
        BudgetName::MaxProviderCalls | BudgetName::DeadlineSeconds => {
            let n: u64 = value.parse().map_err(|_| format!("{budget}: `{value}` is not a whole number"))?;
            if n > MAX_EXACT {
                return Err(format!("{budget}: at most {MAX_EXACT}"));
            }
            n as f64
        }
    };
    Ok(Raise { budget, to })
}

/// The largest whole number a raise keeps exactly (2^53).
const MAX_EXACT: u64 = 1 << 53;

/// A budget's limit in `b`, in the plan's units.
pub fn limit_of(b: &Budgets, budget: BudgetName) -> f64 {
    match budget {
        BudgetName::DeadlineSeconds => b.deadline_seconds as f64,
        BudgetName::MaxAttemptsPerTask => b.max_attempts_per_task.into(),
        BudgetName::MaxProviderCalls => b.max_provider_calls as f64,
        BudgetName::MaxCost => b.max_cost,
        BudgetName::MaxRevisions => b.max_revisions.into(),
    }
}

/// A raise must raise: a limit at or below the one in force is refused (a
/// plan lowers its own budgets by a revision).
pub fn check(in_force: &Budgets, r: &Raise) -> Result<(), String> {
    let now = limit_of(in_force, r.budget);
    if r.to <= now {
        return Err(format!(
            "--raise {}={}: the limit in force is already {now}; a raise must go above it",
            r.budget, r.to
        ));
    }
    Ok(())
}

/// The budgets in force: the plan's (with `max_revisions` already the
/// lowest any revision set), each raised to the highest a person asked.
pub fn in_force(plan: &Budgets, raises: &[Raise]) -> Budgets {
    let mut b = plan.clone();
    for r in raises {
        if r.to <= limit_of(&b, r.budget) {
            continue;
        }
        match r.budget {
            BudgetName::DeadlineSeconds => b.deadline_seconds = r.to as u64,
            BudgetName::MaxAttemptsPerTask => b.max_attempts_per_task = r.to as u32,
            BudgetName::MaxProviderCalls => b.max_provider_calls = r.to as u64,
            BudgetName::MaxCost => b.max_cost = r.to,
            BudgetName::MaxRevisions => b.max_revisions = r.to as u32,
        }
    }
    b
}

/// A limit that lets the refused work go on: for a count, the limit plus
/// what was used of it again (at least one more); for the deadline, twice
/// the limit; for cost, enough for the refused call — or, for a goal
/// already past the limit (reported spending) or a call that may spend
/// (which needs room after its cost), twice what is used (at least 1).
pub fn suggested(e: &Exhausted) -> String {
    match e.budget {
        BudgetName::MaxCost => {
            let needed = e.used + e.requested.max(0.0);
            if e.used <= e.limit && needed > e.limit {
                format_units(needed)
            } else {
                format_units((needed * 2.0).max(1.0))
            }
        }
        _ => format!("{}", (e.limit * 2.0).max(e.limit + 1.0).max(1.0) as u64),
    }
}

fn format_units(units: f64) -> String {
    let s = format!("{units:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The way out of an exhausted budget, as the exact commands to type
/// (`advice::of_budget`). `plan` is the plan file's path as the person
/// gave it.
pub fn way_out(e: &Exhausted, plan: &str) -> String {
    let scope = advice::Scope { goal_id: "", goal_is_default: true, plan_path: plan };
    let ways = advice::of_budget(e.budget, &suggested(e), &scope);
    let raise = ways.iter().find(|w| w.command.starts_with("engine revise ")).map_or("", |w| w.command.as_str());
    match ways.iter().find(|w| w.command.starts_with("engine run ")) {
        Some(run) => format!(
            "the deadline bounds one run of work: `{}` goes on with a new one; or raise it: `{raise}`",
            run.command
        ),
        None => format!("raise it (a person's act, recorded): `{raise}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_budget_and_refuses_what_a_plan_could_not_hold() {
        assert_eq!(parse("max_revisions=5"), Ok(Raise { budget: BudgetName::MaxRevisions, to: 5.0 }));
        assert_eq!(parse("max_cost=2.5").unwrap().to, 2.5);
        assert_eq!(parse("deadline_seconds=7200").unwrap().budget, BudgetName::DeadlineSeconds);
        assert!(parse("max_revisions").unwrap_err().contains("NAME=VALUE"));
        assert!(parse("max_revision=5").unwrap_err().contains("is not a budget (one of deadline_seconds"));
        assert!(parse("max_revisions=-1").unwrap_err().contains("whole number"));
        assert!(parse("max_revisions=2.5").unwrap_err().contains("whole number"));
        assert!(parse("max_cost=0.0000001").unwrap_err().contains("millionths"));
        assert!(parse("max_cost=nan").is_err());
        assert!(parse("max_provider_calls=99999999999999999999").is_err());
    }

    #[test]
    fn a_raise_must_go_above_the_limit_in_force() {
        let b = Budgets::default();
        assert!(check(&b, &Raise { budget: BudgetName::MaxRevisions, to: 4.0 }).is_ok());
        let e = check(&b, &Raise { budget: BudgetName::MaxRevisions, to: 3.0 }).unwrap_err();
        assert!(e.contains("already 3"), "{e}");
    }

    #[test]
    fn in_force_takes_the_highest_raise_and_never_lowers() {
        let plan = Budgets { max_revisions: 2, max_cost: 1.0, ..Budgets::default() };
        let raises = [
            Raise { budget: BudgetName::MaxRevisions, to: 5.0 },
            Raise { budget: BudgetName::MaxRevisions, to: 4.0 },
            Raise { budget: BudgetName::MaxCost, to: 0.5 },
            Raise { budget: BudgetName::DeadlineSeconds, to: 7200.0 },
        ];
        let b = in_force(&plan, &raises);
        assert_eq!((b.max_revisions, b.max_cost, b.deadline_seconds), (5, 1.0, 7200));
        assert_eq!(in_force(&plan, &[]), plan);
    }

    #[test]
    fn the_way_out_is_a_command_to_type() {
        let e = Exhausted { budget: BudgetName::MaxRevisions, used: 3.0, limit: 3.0, requested: 1.0, detail: None };
        assert_eq!(
            way_out(&e, "plan.json"),
            "raise it (a person's act, recorded): `engine revise plan.json --reason \"…\" --raise max_revisions=6`"
        );
        let e = Exhausted { budget: BudgetName::MaxCost, used: 0.1, limit: 0.3, requested: 0.25, detail: None };
        assert!(way_out(&e, "p.json").ends_with("--raise max_cost=0.35`"), "{}", way_out(&e, "p.json"));
        let e =
            Exhausted { budget: BudgetName::DeadlineSeconds, used: 61.0, limit: 60.0, requested: 0.0, detail: None };
        let w = way_out(&e, "p.json");
        assert!(w.contains("`engine run p.json` goes on") && w.ends_with("--raise deadline_seconds=120`"), "{w}");
        let e = Exhausted { budget: BudgetName::MaxProviderCalls, used: 0.0, limit: 0.0, requested: 1.0, detail: None };
        assert!(way_out(&e, "p.json").ends_with("--raise max_provider_calls=1`"));
        // Past the limit (reported spending), or a call that may spend with
        // no room: twice what is used, so what comes next has room.
        let past = Exhausted { budget: BudgetName::MaxCost, used: 4.0, limit: 2.0, requested: 0.0, detail: None };
        assert!(way_out(&past, "p.json").ends_with("--raise max_cost=8`"), "{}", way_out(&past, "p.json"));
        let room = Exhausted { budget: BudgetName::MaxCost, used: 1.0, limit: 2.0, requested: 1.0, detail: None };
        assert!(way_out(&room, "p.json").ends_with("--raise max_cost=4`"), "{}", way_out(&room, "p.json"));
        let none = Exhausted { budget: BudgetName::MaxCost, used: 0.0, limit: 0.0, requested: 0.0, detail: None };
        assert!(way_out(&none, "p.json").ends_with("--raise max_cost=1`"), "{}", way_out(&none, "p.json"));
    }
}
