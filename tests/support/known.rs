//! Defects issue 9 lists that the crash sweep and the soak find, and that
//! are being fixed on other branches. A finding that contains `signature`
//! (for `plan`, if given) is reported as that defect instead of failing the
//! test. Remove an entry once its fix is merged: from then on the sweep and
//! the soak fail if it comes back (`crash_sweep_strict`, and the soak's
//! `--strict`, fail on these too).

pub struct Known {
    pub defect: &'static str,
    pub plan: Option<&'static str>,
    pub signature: &'static str,
}

pub const KNOWN: &[Known] = &[Known {
    defect: "defect 2 of issue 9: panic on restart, an attempt observed present is validated twice (fix on the runtime branch)",
    plan: None,
    signature: "validated attempts are in flight",
}];

pub fn known(plan: &str, finding: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.plan.is_none_or(|p| p == plan) && finding.contains(k.signature))
}
