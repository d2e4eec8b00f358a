//! Defects issue 9 lists that the crash sweep and the soak find, and that
//! are being fixed on other branches. A finding that contains one of its
//! `signatures` (for `plan`, if given) is reported as that defect instead
//! of failing the test. Remove an entry once its fix is merged: from then on the sweep and
//! the soak fail if it comes back (`crash_sweep_strict`, and the soak's
//! `--strict`, fail on these too).

pub struct Known {
    pub defect: &'static str,
    pub plan: Option<&'static str>,
    /// Words any of which mark a finding as this defect.
    pub signatures: &'static [&'static str],
}

pub const KNOWN: &[Known] = &[
    Known {
        defect: "defect 2 of issue 9: panic on restart, an attempt observed present is validated twice (fix on the runtime branch)",
        plan: None,
        signatures: &["validated attempts are in flight"],
    },
    Known {
        defect: "defect 3 of issue 9: a kill during store creation leaves a store every run refuses (fix on the store branch)",
        plan: None,
        // The runs' refusal, and `engine verify` naming the journal left behind.
        signatures: &["attempt to write a readonly database", "rollback journal"],
    },
];

pub fn known(plan: &str, finding: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.plan.is_none_or(|p| p == plan) && k.signatures.iter().any(|s| finding.contains(s)))
}
