//! Cost as an integer: micro-units (millionths of the plan's unit), so
//! budgets add and compare exactly — no float sums, no epsilon.
//!
//! The plan file still states costs as JSON numbers (`"cost": 0.25`); they
//! are converted once, when the plan is validated: rounded to the nearest
//! micro-unit, refused above `COST_UNITS_MAX`, and a positive cost that
//! would round to zero is refused rather than made free.

use std::fmt;

use serde::{Serialize, Serializer};

/// Micro-units per unit of cost.
pub const MICROS_PER_UNIT: i64 = 1_000_000;

pub use crate::limits::COST_UNITS_MAX;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost {
    micros: i64,
}

/// Why a plan's number is not a cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CostError {
    NotFiniteOrNegative,
    TooLarge,
    BelowOneMicro,
}

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CostError::NotFiniteOrNegative => f.write_str("must be a finite number >= 0"),
            CostError::TooLarge => write!(f, "must be at most {COST_UNITS_MAX:e}"),
            CostError::BelowOneMicro => f.write_str("must be 0 or at least 0.000001 (costs are counted in millionths)"),
        }
    }
}

impl Cost {
    pub const ZERO: Cost = Cost { micros: 0 };

    pub fn from_micros(micros: i64) -> Cost {
        Cost { micros }
    }

    /// A plan's number of units, checked and rounded to the nearest
    /// micro-unit (ties away from zero).
    pub fn from_units(units: f64) -> Result<Cost, CostError> {
        if !(units.is_finite() && units >= 0.0) {
            return Err(CostError::NotFiniteOrNegative);
        }
        if units > COST_UNITS_MAX {
            return Err(CostError::TooLarge);
        }
        let micros = (units * MICROS_PER_UNIT as f64).round() as i64;
        if units > 0.0 && micros == 0 {
            return Err(CostError::BelowOneMicro);
        }
        Ok(Cost { micros })
    }

    /// A cost from a plan that passed validation (which checked it).
    pub fn of_plan(units: f64) -> Cost {
        Cost::from_units(units).unwrap_or(Cost { micros: i64::MAX })
    }

    pub fn micros(self) -> i64 {
        self.micros
    }

    pub fn is_zero(self) -> bool {
        self.micros == 0
    }

    /// The sum, saturating (never reached within `COST_UNITS_MAX` budgets).
    pub fn plus(self, other: Cost) -> Cost {
        Cost { micros: self.micros.saturating_add(other.micros) }
    }

    /// In units, for people and `--json` (as plans state it).
    pub fn units(self) -> f64 {
        self.micros as f64 / MICROS_PER_UNIT as f64
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.units())
    }
}

/// Serialized in units, as a JSON number: what plans and reports say.
impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.units())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_numbers_round_to_micro_units() {
        assert_eq!(Cost::from_units(0.0).unwrap().micros(), 0);
        assert_eq!(Cost::from_units(2.5).unwrap().micros(), 2_500_000);
        assert_eq!(Cost::from_units(0.1).unwrap().micros(), 100_000);
        assert_eq!(Cost::from_units(0.0000015).unwrap().micros(), 2, "ties away from zero");
        assert_eq!(Cost::from_units(1e12).unwrap().micros(), 1_000_000_000_000_000_000);
    }

    #[test]
    fn what_is_not_a_cost_is_refused() {
        assert_eq!(Cost::from_units(-1.0), Err(CostError::NotFiniteOrNegative));
        assert_eq!(Cost::from_units(f64::NAN), Err(CostError::NotFiniteOrNegative));
        assert_eq!(Cost::from_units(f64::INFINITY), Err(CostError::NotFiniteOrNegative));
        assert_eq!(Cost::from_units(1e12 + 1e6), Err(CostError::TooLarge));
        assert_eq!(Cost::from_units(0.0000004), Err(CostError::BelowOneMicro), "a cost never rounds to free");
    }

    #[test]
    fn sums_are_exact_where_floats_are_not() {
        let tenth = Cost::from_units(0.1).unwrap();
        let sum = tenth.plus(tenth).plus(tenth);
        assert_eq!(sum, Cost::from_units(0.3).unwrap(), "0.1 + 0.1 + 0.1 == 0.3 in micro-units");
        assert_ne!(0.1_f64 + 0.1 + 0.1, 0.3, "(not so in f64)");
        assert_eq!(sum.units(), 0.3);
        assert_eq!(Cost::from_units(2.5).unwrap().to_string(), "2.5");
        assert_eq!(Cost::ZERO.to_string(), "0");
    }
}
