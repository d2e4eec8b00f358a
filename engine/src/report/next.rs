//! The one way every human printer shows what a person does next
//! (`decide::advice`): a `next:` line, and an `or:` line for each other
//! way, every command in backticks exactly as it is typed.

use crate::commands::advice::Advised;
use crate::decide::advice::Way;

/// The ways' lines, each starting with `indent`; nothing when there is no way.
pub fn lines(ways: &[Way], plan: &str, task_ref: &str, indent: &str) -> String {
    let mut out = String::new();
    for (i, w) in ways.iter().enumerate() {
        let label = if i == 0 { "next:" } else { "  or:" };
        out.push_str(&format!("{indent}{label} {}\n", w.words(plan, task_ref)));
    }
    out
}

/// The same, for ways read from the ledger.
pub fn of(a: &Advised, indent: &str) -> String {
    lines(&a.ways, a.plan_path(), &a.task_ref, indent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::advice::{Before, Way};

    #[test]
    fn one_line_per_way_with_the_command_in_backticks() {
        let ways = [
            Way { before: None, command: "engine retry T1".into() },
            Way { before: Some(Before::MoreTime), command: "engine revise p.json --reason \"…\"".into() },
        ];
        assert_eq!(
            lines(&ways, "p.json", "T1", "    "),
            "    next: `engine retry T1`\n      or: raise task T1's `timeout_seconds` in p.json, then \
             `engine revise p.json --reason \"…\"`\n"
        );
        assert_eq!(lines(&[], "p.json", "T1", "  "), "");
    }
}
