//! What a goal's state claims and does not claim, in the engine's words
//! (SPEC.md: exit 0 is "every task succeeded or was reused, acceptance
//! checks passed, no unknown outcome left"). Pure.

/// `(claims, does_not_claim)` for a goal `state` with `checks` acceptance
/// checks; `unchecked` names the criteria without a check, `constraints`
/// says whether the goal has plain-statement constraints (the engine does
/// not check those), and `settled` names the tasks that completed only on
/// a person's `settled_ok`.
pub fn goal_words(
    state: &str,
    checks: usize,
    unchecked: &[String],
    constraints: bool,
    settled: &[String],
) -> (String, String) {
    // `completed`: met, with constraints nothing checks (`decide::verdict::word`).
    let met = state == "satisfied" || state == "completed";
    let mut not = match state {
        "satisfied" | "completed" => vec!["that an external effect still holds now".to_string()],
        "failed" => vec!["that a retry or a repair would help, or that the goal cannot be met".to_string()],
        "needs_settlement" => vec!["that the operation failed, or that re-sending it is safe".to_string()],
        "open" => vec!["that anything failed, or that the goal is met".to_string()],
        _ => vec!["anything this report does not show".to_string()],
    };
    if met {
        if !unchecked.is_empty() {
            not.push(format!(
                "that acceptance criteria without a check are met (not verified: {})",
                unchecked.join(", ")
            ));
        }
        if constraints {
            not.push("that the plain-statement constraints were kept (the engine does not check them)".to_string());
        }
        if !settled.is_empty() {
            not.push(format!("that the engine verified the effect of {} (a person settled it)", settled.join(", ")));
        }
    }
    let tasks = tasks_words(settled);
    let claims = match state {
        "satisfied" | "completed" if checks > 0 => {
            format!("{tasks}, every acceptance check passed, no unknown outcome left")
        }
        "satisfied" | "completed" => format!(
            "{tasks} and no unknown outcome is left; the goal has no acceptance check, so nothing checked the goal \
             itself"
        ),
        "failed" => "a task failed with classified evidence (a violated constraint included), a goal constraint's \
                     check failed, or an acceptance check failed"
            .to_string(),
        "needs_settlement" => {
            "an operation may or may not have taken effect and observation could not tell: a person must settle it"
                .to_string()
        }
        "open" => "the goal is not judged met: a task has not completed, or waits on an approval, a budget \
                   or the re-send of an operation settled as not run"
            .to_string(),
        other => format!("the ledger records the state `{other}`"),
    };
    (claims, not.join("; "))
}

/// The tasks' part of a satisfied goal's claim: a task that completed on
/// a person's settlement is named, never folded into "every task succeeded".
fn tasks_words(settled: &[String]) -> String {
    if settled.is_empty() {
        return "every task succeeded or was reused".to_string();
    }
    format!(
        "{} completed only on a person's settlement `settled_ok` (its effect was not verified by the engine), \
         every other task succeeded or was reused",
        settled.join(", ")
    )
}

/// What a task state claims, for the legend (SPEC's task states).
pub const TASK_STATES: &[(&str, &str)] = &[
    (
        "succeeded",
        "a receipt was ok and every validation passed against the recorded checkpoint (not: that the goal is met)",
    ),
    (
        "reused",
        "an earlier revision's completion stands: goal contract, meaning, dependencies and checkpoint all matched",
    ),
    ("failed", "a failure with classified evidence (not: that a retry would help)"),
    ("effect_unknown", "the effect may or may not have happened; a person must settle it (not: that it failed)"),
    ("awaiting_approval", "the next call needs a person's approval of this exact request"),
    ("blocked", "a dependency has not completed"),
    ("pending", "not started in this revision"),
    ("ready", "may start"),
    ("running", "an attempt is in flight (or its run stopped before it ended)"),
    (
        "cancelled",
        "a person stopped the run while it was in flight; effect none or local runs again on the next plain run \
         (not: that no effect happened, or that it failed)",
    ),
];

#[cfg(test)]
mod tests {
    use super::goal_words;

    #[test]
    fn satisfied_without_checks_never_says_every_check_passed() {
        let (claims, _) = goal_words("satisfied", 0, &[], false, &[]);
        assert!(!claims.contains("check passed"), "{claims}");
        assert!(claims.contains("no acceptance check"), "{claims}");
        let (claims, _) = goal_words("satisfied", 2, &[], false, &[]);
        assert!(claims.contains("every acceptance check passed"), "{claims}");
    }

    #[test]
    fn a_task_settled_ok_is_named_never_folded_into_every_task_succeeded() {
        let (claims, not) = goal_words("satisfied", 1, &[], false, &["T2".to_string()]);
        assert!(claims.starts_with("T2 completed only on a person's settlement"), "{claims}");
        assert!(!claims.starts_with("every task succeeded"), "{claims}");
        assert!(not.contains("verified the effect of T2"), "{not}");
    }

    #[test]
    fn unchecked_criteria_and_constraints_are_named_as_not_verified() {
        let (_, not) = goal_words("satisfied", 1, &["A2".to_string()], true, &[]);
        assert!(not.contains("not verified: A2"), "{not}");
        assert!(not.contains("does not check them"), "{not}");
        let (claims, not) = goal_words("needs_settlement", 1, &[], false, &[]);
        assert!(claims.contains("a person must settle"), "{claims}");
        assert!(not.contains("re-sending it is safe"), "{not}");
    }
}
