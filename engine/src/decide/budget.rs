//! Budgets, checked at the call site before an intent is written (never
//! after). A pure decision over the usage the ledger reports; cost is
//! compared in integer micro-units, exactly.

use serde::{Deserialize, Serialize};

use crate::cost::Cost;
use crate::plan::model::Budgets;

/// The budgets of SPEC.md, by their stable names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetName {
    DeadlineSeconds,
    MaxAttemptsPerTask,
    MaxProviderCalls,
    MaxCost,
    MaxRevisions,
}

impl BudgetName {
    pub const ALL: [BudgetName; 5] = [
        BudgetName::DeadlineSeconds,
        BudgetName::MaxAttemptsPerTask,
        BudgetName::MaxProviderCalls,
        BudgetName::MaxCost,
        BudgetName::MaxRevisions,
    ];

    pub fn parse(s: &str) -> Option<BudgetName> {
        BudgetName::ALL.into_iter().find(|b| b.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BudgetName::DeadlineSeconds => "deadline_seconds",
            BudgetName::MaxAttemptsPerTask => "max_attempts_per_task",
            BudgetName::MaxProviderCalls => "max_provider_calls",
            BudgetName::MaxCost => "max_cost",
            BudgetName::MaxRevisions => "max_revisions",
        }
    }
}

impl std::fmt::Display for BudgetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the ledger says has been used so far.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub attempts_of_task: u64,
    pub provider_calls: u64,
    /// The calls' declared costs and the spending their providers reported.
    pub cost: Cost,
    pub elapsed_seconds: u64,
}

/// Why a goal past its cost budget sends nothing more.
pub const PAST_COST_BUDGET: &str = "the goal is past its cost budget: nothing more is sent until a person raises it";

/// The call the budgets are asked about.
#[derive(Debug, Clone, Copy, Default)]
pub struct Call {
    /// Its declared `cost`.
    pub cost: Cost,
    /// Its task may spend more, as its provider will report (`may_spend`).
    pub may_spend: bool,
}

/// An exhausted budget: which, how much was used, the limit (in the plan's
/// units, as people read them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exhausted {
    pub budget: BudgetName,
    pub used: f64,
    pub limit: f64,
    /// What the refused call would have added.
    pub requested: f64,
    /// More to say: a call that may spend and has no room, or the spending
    /// providers reported that took the use past the limit (named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: used {} of {}", self.budget, self.used, self.limit)?;
        if self.requested > 0.0 && self.budget == BudgetName::MaxCost {
            write!(f, " (this call would add {})", self.requested)?;
        }
        if let Some(detail) = &self.detail {
            write!(f, "; {detail}")?;
        }
        Ok(())
    }
}

/// May one more provider call be made? The first budget that refuses is
/// named: deadline, attempts, calls, cost. On cost: a goal already past
/// `max_cost` (spending its providers reported took it there, or a
/// revision lowered the limit) makes no call at all until a person raises
/// it; a paid call must fit; a call that may spend must leave room after
/// its own cost.
pub fn check_call(b: &Budgets, u: &Usage, call: Call) -> Result<(), Exhausted> {
    let call_cost = call.cost;
    if u.elapsed_seconds >= b.deadline_seconds {
        return Err(Exhausted {
            budget: BudgetName::DeadlineSeconds,
            used: u.elapsed_seconds as f64,
            limit: b.deadline_seconds as f64,
            requested: 0.0,
            detail: None,
        });
    }
    if u.attempts_of_task >= b.max_attempts_per_task as u64 {
        return Err(Exhausted {
            budget: BudgetName::MaxAttemptsPerTask,
            used: u.attempts_of_task as f64,
            limit: b.max_attempts_per_task as f64,
            requested: 1.0,
            detail: None,
        });
    }
    if u.provider_calls >= b.max_provider_calls {
        return Err(Exhausted {
            budget: BudgetName::MaxProviderCalls,
            used: u.provider_calls as f64,
            limit: b.max_provider_calls as f64,
            requested: 1.0,
            detail: None,
        });
    }
    let max_cost = b.max_cost();
    let exhausted = |detail: Option<&str>| Exhausted {
        budget: BudgetName::MaxCost,
        used: u.cost.units(),
        limit: max_cost.units(),
        requested: call_cost.units(),
        detail: detail.map(str::to_string),
    };
    if u.cost > max_cost {
        return Err(exhausted(Some(PAST_COST_BUDGET)));
    }
    if !call_cost.is_zero() && u.cost.plus(call_cost) > max_cost {
        return Err(exhausted(None));
    }
    if call.may_spend && u.cost.plus(call_cost) >= max_cost {
        return Err(exhausted(Some(
            "the task may spend (`may_spend`), and the budget leaves no room for what it would spend after its call's cost",
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> Usage {
        Usage { attempts_of_task: 0, provider_calls: 0, cost: Cost::ZERO, elapsed_seconds: 0 }
    }

    fn cost(units: f64) -> Cost {
        Cost::from_units(units).unwrap()
    }

    fn paid(cost: Cost) -> Call {
        Call { cost, may_spend: false }
    }

    #[test]
    fn at_the_boundary() {
        let b = Budgets {
            max_attempts_per_task: 2,
            max_revisions: 1,
            max_provider_calls: 3,
            max_cost: 5.0,
            deadline_seconds: 10,
        };
        assert!(check_call(&b, &usage(), paid(Cost::ZERO)).is_ok());
        assert!(check_call(&b, &Usage { attempts_of_task: 1, ..usage() }, paid(Cost::ZERO)).is_ok());
        assert_eq!(
            check_call(&b, &Usage { attempts_of_task: 2, ..usage() }, paid(Cost::ZERO)).unwrap_err().budget,
            BudgetName::MaxAttemptsPerTask
        );
        assert!(check_call(&b, &Usage { provider_calls: 2, ..usage() }, paid(Cost::ZERO)).is_ok());
        assert_eq!(
            check_call(&b, &Usage { provider_calls: 3, ..usage() }, paid(Cost::ZERO)).unwrap_err().budget,
            BudgetName::MaxProviderCalls
        );
        assert!(check_call(&b, &Usage { cost: cost(3.0), ..usage() }, paid(cost(2.0))).is_ok());
        assert_eq!(
            check_call(&b, &Usage { cost: cost(3.0), ..usage() }, paid(cost(2.5))).unwrap_err().budget,
            BudgetName::MaxCost
        );
        assert!(check_call(&b, &Usage { elapsed_seconds: 9, ..usage() }, paid(Cost::ZERO)).is_ok());
        assert_eq!(
            check_call(&b, &Usage { elapsed_seconds: 10, ..usage() }, paid(Cost::ZERO)).unwrap_err().budget,
            BudgetName::DeadlineSeconds
        );
    }

    #[test]
    fn zero_cost_calls_ignore_the_cost_budget() {
        let b = Budgets { max_cost: 0.0, ..Budgets::default() };
        assert!(check_call(&b, &usage(), paid(Cost::ZERO)).is_ok());
        assert!(check_call(&b, &usage(), paid(cost(0.01))).is_err());
    }

    #[test]
    fn cost_compares_exactly_at_the_limit() {
        // 0.1 + 0.2 == 0.3 in micro-units: the call that reaches the limit
        // exactly is allowed, one micro-unit more is not.
        let b = Budgets { max_cost: 0.3, ..Budgets::default() };
        assert!(check_call(&b, &Usage { cost: cost(0.1), ..usage() }, paid(cost(0.2))).is_ok());
        let over = check_call(&b, &Usage { cost: cost(0.1), ..usage() }, paid(cost(0.200001))).unwrap_err();
        assert_eq!(over.budget, BudgetName::MaxCost);
        assert_eq!(over.to_string(), "max_cost: used 0.1 of 0.3 (this call would add 0.200001)");
    }

    #[test]
    fn a_goal_past_its_cost_budget_makes_no_call_and_one_that_may_spend_needs_room() {
        let b = Budgets { max_cost: 2.0, ..Budgets::default() };
        // Past the limit (reported spending took it there): even a free call waits.
        let over = check_call(&b, &Usage { cost: cost(2.5), ..usage() }, paid(Cost::ZERO)).unwrap_err();
        assert_eq!(over.budget, BudgetName::MaxCost);
        assert!(over.to_string().starts_with("max_cost: used 2.5 of 2; the goal is past"), "{over}");
        // At the limit exactly, a free call still goes (nothing is spent).
        assert!(check_call(&b, &Usage { cost: cost(2.0), ..usage() }, paid(Cost::ZERO)).is_ok());
        // A call that may spend needs room after its own cost.
        let spends = |c: f64| Call { cost: cost(c), may_spend: true };
        assert!(check_call(&b, &usage(), spends(1.0)).is_ok());
        assert!(check_call(&b, &Usage { cost: cost(0.999999), ..usage() }, spends(1.0)).is_ok());
        let full = check_call(&b, &Usage { cost: cost(1.0), ..usage() }, spends(1.0)).unwrap_err();
        assert!(full.to_string().contains("may_spend"), "{full}");
        let none = Budgets { max_cost: 0.0, ..Budgets::default() };
        assert!(check_call(&none, &usage(), spends(0.0)).is_err(), "the default budget of 0 leaves no room");
    }

    #[test]
    fn budget_names_are_spec_words() {
        assert_eq!(serde_json::to_value(BudgetName::MaxAttemptsPerTask).unwrap(), "max_attempts_per_task");
        assert_eq!(BudgetName::DeadlineSeconds.to_string(), "deadline_seconds");
    }
}
