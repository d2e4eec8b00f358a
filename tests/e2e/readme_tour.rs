//! The README's "A plan, end to end": the plan it shows is
//! `examples/tour/plan.json` byte for byte, `engine check` passes on it, and
//! running it (the receiver fixture standing in for the shop) prints exactly
//! the transcript the README shows.

use std::fs;

use super::common::*;

const SECTION: &str = "## A plan, end to end";

/// The README's section text, up to the next `## ` heading.
fn tour_section() -> String {
    let readme = fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let start = readme.find(SECTION).expect("the README has the tour section");
    let rest = &readme[start + SECTION.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_string()
}

/// The `console` block's steps: (arguments after `engine`, expected stdout, exit code).
fn transcript(section: &str) -> Vec<(Vec<String>, String, i32)> {
    let start = section.find("```console\n").expect("a console block") + "```console\n".len();
    let block = &section[start..start + section[start..].find("```").expect("the block ends")];
    let mut steps = Vec::new();
    for step in block.split("$ engine ").skip(1) {
        let (command, output) = step.split_once('\n').expect("a command line");
        let output = output.trim_end();
        let (stdout, exit) = output.rsplit_once("(exit ").expect("each step ends with (exit N)");
        let code = exit.trim_end_matches(')').parse().expect("an exit code");
        steps.push((command.split(' ').map(String::from).collect(), stdout.to_string(), code));
    }
    steps
}

#[test]
fn the_readme_shows_the_tour_plan_as_it_is() {
    let plan = fs::read_to_string(repo_root().join("examples/tour/plan.json")).expect("the tour plan");
    let section = tour_section();
    assert!(section.contains(&format!("```json\n{plan}```")), "README's plan differs from examples/tour/plan.json");
}

#[test]
fn the_tour_checks_and_runs_as_the_readme_shows() {
    let receiver = Receiver::start(&["--observe"]);
    let ws = Ws::new();
    copy_tree(&repo_root().join("examples/tour"), &ws.dir);
    let plan = ws.read("plan.json");
    assert!(plan.contains("127.0.0.1:8765"), "the tour names the shop's port");
    ws.write("plan.json", plan.replace("127.0.0.1:8765", &format!("127.0.0.1:{}", receiver.port)));

    let steps = transcript(&tour_section());
    assert!(steps.len() >= 3, "check, run and a re-run at least: {steps:?}");
    for (args, expected, code) in &steps {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ws.engine(&args);
        assert_eq!(out.code(), *code, "engine {args:?}\n{}", out.describe());
        assert_eq!(out.stdout.trim_end(), expected.trim_end(), "engine {args:?} prints what the README shows");
        assert!(!out.stderr.contains("warning:"), "the tour teaches by example: no warning\n{}", out.stderr);
    }
    // One delivery to the shop: the re-run kept `publish` and sent nothing.
    let deliveries = receiver.deliveries();
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(deliveries[0]["key"], ws.op_of("publish").as_str());
    assert_eq!(deliveries[0]["body"]["list"], "prices.json");
}
