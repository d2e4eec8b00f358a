//! Budgets, checked at the call site before an intent is written (never
//! after). A pure decision over the usage the ledger reports.

use serde::Serialize;

use crate::plan::Budgets;

/// What the ledger says has been used so far.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    pub attempts_of_task: u64,
    pub provider_calls: u64,
    pub cost: f64,
    pub elapsed_seconds: u64,
}

/// An exhausted budget: which, how much was used, the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exhausted {
    pub budget: &'static str,
    pub used: f64,
    pub limit: f64,
    /// What the refused call would have added.
    pub requested: f64,
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: used {} of {}", self.budget, self.used, self.limit)?;
        if self.requested > 0.0 && self.budget == "max_cost" {
            write!(f, " (this call would add {})", self.requested)?;
        }
        Ok(())
    }
}

/// May one more provider call of cost `call_cost` be made?
pub fn check_call(b: &Budgets, u: &Usage, call_cost: f64) -> Result<(), Exhausted> {
    if u.elapsed_seconds >= b.deadline_seconds {
        return Err(Exhausted {
            budget: "deadline_seconds",
            used: u.elapsed_seconds as f64,
            limit: b.deadline_seconds as f64,
            requested: 0.0,
        });
    }
    if u.attempts_of_task >= b.max_attempts_per_task as u64 {
        return Err(Exhausted {
            budget: "max_attempts_per_task",
            used: u.attempts_of_task as f64,
            limit: b.max_attempts_per_task as f64,
            requested: 1.0,
        });
    }
    if u.provider_calls >= b.max_provider_calls {
        return Err(Exhausted {
            budget: "max_provider_calls",
            used: u.provider_calls as f64,
            limit: b.max_provider_calls as f64,
            requested: 1.0,
        });
    }
    if call_cost > 0.0 && u.cost + call_cost > b.max_cost {
        return Err(Exhausted { budget: "max_cost", used: u.cost, limit: b.max_cost, requested: call_cost });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> Usage {
        Usage { attempts_of_task: 0, provider_calls: 0, cost: 0.0, elapsed_seconds: 0 }
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
        assert!(check_call(&b, &usage(), 0.0).is_ok());
        assert!(check_call(&b, &Usage { attempts_of_task: 1, ..usage() }, 0.0).is_ok());
        assert_eq!(
            check_call(&b, &Usage { attempts_of_task: 2, ..usage() }, 0.0).unwrap_err().budget,
            "max_attempts_per_task"
        );
        assert!(check_call(&b, &Usage { provider_calls: 2, ..usage() }, 0.0).is_ok());
        assert_eq!(
            check_call(&b, &Usage { provider_calls: 3, ..usage() }, 0.0).unwrap_err().budget,
            "max_provider_calls"
        );
        assert!(check_call(&b, &Usage { cost: 3.0, ..usage() }, 2.0).is_ok());
        assert_eq!(check_call(&b, &Usage { cost: 3.0, ..usage() }, 2.5).unwrap_err().budget, "max_cost");
        assert!(check_call(&b, &Usage { elapsed_seconds: 9, ..usage() }, 0.0).is_ok());
        assert_eq!(
            check_call(&b, &Usage { elapsed_seconds: 10, ..usage() }, 0.0).unwrap_err().budget,
            "deadline_seconds"
        );
    }

    #[test]
    fn zero_cost_calls_ignore_the_cost_budget() {
        let b = Budgets { max_cost: 0.0, ..Budgets::default() };
        assert!(check_call(&b, &usage(), 0.0).is_ok());
        assert!(check_call(&b, &usage(), 0.01).is_err());
    }
}
