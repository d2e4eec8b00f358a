//! A seed's workspace files (issue 43, early cutoff): some tasks declare
//! an input (`in/<ref>.txt`) that a person edits now and then between two
//! runs, and some an output (`out/<ref>.txt`) that their provider writes as
//! it takes a call — the bytes of its last call, or now and then new ones.
//! So an upstream that runs again (an edited input, `engine rerun`, a
//! changed tool) leaves byte-identical outputs or changed ones, and early
//! cutoff keeps its dependants or runs them again. Drawn apart from the
//! rest of the story: a seed whose plan declares no file tells its story
//! as before.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::plan::{Generated, Traits};
use super::rng::Rng;

/// Mixed into the seed for the files' own draws.
pub const FILES_SEED: u64 = 0x2545_f491_4f6c_dd1d;
/// In a hundred tasks another depends on (an upstream): how many declare
/// an output, of those how many an input, and of those with an `external`
/// effect how many are made `local` (an upstream that can cut off). In a
/// hundred other tasks: how many declare an output, how many an input.
const UPSTREAM_OUTPUT_PERCENT: u64 = 80;
const UPSTREAM_INPUT_PERCENT: u64 = 70;
const UPSTREAM_LOCAL_PERCENT: u64 = 70;
const OUTPUT_PERCENT: u64 = 40;
const INPUT_PERCENT: u64 = 25;
/// In a hundred calls that write an output: how many write new bytes.
const NEW_BYTES_PERCENT: u64 = 35;
/// Before a plain run, in a hundred: the person edits one task's input.
const EDIT_PERCENT: u64 = 15;
/// After a run that met the goal, in a hundred: the person edits an input
/// and runs again (were the story otherwise over).
const AGAIN_PERCENT: u64 = 60;

pub fn input_of(task_ref: &str) -> String {
    format!("in/{task_ref}.txt")
}

pub fn output_of(task_ref: &str) -> String {
    format!("out/{task_ref}.txt")
}

/// The tasks another task depends on.
fn upstreams(traits: &BTreeMap<String, Traits>) -> BTreeSet<String> {
    traits.values().flat_map(|t| t.depends_on.iter().cloned()).collect()
}

/// Declare inputs and outputs on some of the plan's tasks, as `rng` draws:
/// most upstreams can cut off, and their inputs are edited.
pub fn declare(generated: &mut Generated, rng: &mut Rng) {
    let upstream = upstreams(&generated.traits);
    let Some(tasks) = generated.plan["tasks"].as_array_mut() else { return };
    for task in tasks {
        let r = task["ref"].as_str().unwrap_or_default().to_string();
        let Some(t) = generated.traits.get_mut(&r) else { continue };
        let feeds = upstream.contains(&r);
        let output = rng.chance(if feeds { UPSTREAM_OUTPUT_PERCENT } else { OUTPUT_PERCENT });
        let input = rng.chance(if feeds && output { UPSTREAM_INPUT_PERCENT } else { INPUT_PERCENT });
        if feeds && output && t.effect == "external" && rng.chance(UPSTREAM_LOCAL_PERCENT) {
            t.effect = "local";
            task["effect"] = json!("local");
        }
        if output {
            task["outputs"] = json!([output_of(&r)]);
            t.output = true;
        }
        if input {
            task["inputs"] = json!([input_of(&r)]);
            t.input = true;
        }
    }
}

/// The workspace's folders and each declared input's first text.
pub fn lay_out(ws: &Path, traits: &BTreeMap<String, Traits>) -> std::io::Result<()> {
    if !traits.values().any(|t| t.input || t.output) {
        return Ok(());
    }
    std::fs::create_dir_all(ws.join("in"))?;
    std::fs::create_dir_all(ws.join("out"))?;
    for r in traits.iter().filter(|(_, t)| t.input).map(|(r, _)| r) {
        std::fs::write(ws.join(input_of(r)), format!("the input of {r}\n"))?;
    }
    Ok(())
}

/// After a run that met the goal: does the person edit an input and run
/// again?
pub fn again(traits: &BTreeMap<String, Traits>, rng: &mut Rng) -> bool {
    traits.values().any(|t| t.input) && rng.chance(AGAIN_PERCENT)
}

/// Before a plain run, now and then (`surely`: this time): the person
/// edits one task's input (a line added, which no provider reads). What
/// was edited, if anything.
pub fn edit(ws: &Path, traits: &BTreeMap<String, Traits>, (rng, surely): (&mut Rng, bool), n: u64) -> Option<String> {
    let upstream = upstreams(traits);
    let all: Vec<&String> = traits.iter().filter(|(_, t)| t.input).map(|(r, _)| r).collect();
    if all.is_empty() || !(surely || rng.chance(EDIT_PERCENT)) {
        return None;
    }
    // Mostly an upstream's, whose dependants then wait on its outputs.
    let feeding: Vec<&String> = all.iter().copied().filter(|r| upstream.contains(*r)).collect();
    let inputs = if !feeding.is_empty() && rng.chance(75) { feeding } else { all };
    let r = inputs.get(rng.below(inputs.len() as u64) as usize)?;
    let path = ws.join(input_of(r));
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&format!("edit {n}\n"));
    std::fs::write(&path, text).ok()?;
    Some(input_of(r))
}

/// The providers' hands on the workspace: each task's output, and the
/// bytes it last wrote (a number, bumped when a call writes new ones).
pub struct Writer {
    rng: Rng,
    workspace: PathBuf,
    made: BTreeMap<String, u64>,
}

impl Writer {
    pub fn new(rng: Rng, workspace: PathBuf) -> Writer {
        Writer { rng, workspace, made: BTreeMap::new() }
    }

    /// A call of `task_ref` does its work: its output is written, with
    /// the bytes of its last call or new ones. What was written.
    pub fn write(&mut self, task_ref: &str, traits: &Traits) -> Option<String> {
        if !traits.output {
            return None;
        }
        let new = !self.made.contains_key(task_ref) || self.rng.chance(NEW_BYTES_PERCENT);
        let n = self.made.entry(task_ref.to_string()).or_insert(0);
        *n += u64::from(new);
        let path = output_of(task_ref);
        let text = format!("the output of {task_ref}, version {n}\n");
        std::fs::write(self.workspace.join(&path), text).ok()?;
        Some(format!("{path} written ({} bytes, version {n})", if new { "new" } else { "the same" }))
    }
}
