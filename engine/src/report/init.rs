//! `engine init`: what was written, and the two commands to try next.

use serde_json::json;

use super::Output;
use crate::init::Written;

pub fn render(w: Written) -> Output {
    let mut text = String::new();
    for f in &w.files {
        text.push_str(&format!("wrote {}\n", f.display()));
    }
    let plan = w.dir.join("plan.json");
    text.push_str(&format!(
        "next:\n  engine check {p}\n  engine run {p}\nthen change the plan (docs/plan.md is its reference) and run it again; \
         a provider reaches no network unless its `network` lists where (`\"network\": {{\"connect\": [\"HOST:PORT\"]}}`)\n",
        p = plan.display()
    ));
    Output { json: json!({"written": w.files, "plan": plan}), text, exit_code: 0 }
}
