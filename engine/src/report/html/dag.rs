//! The task graph as SVG: one box per task coloured by its state, edges
//! from dependency to dependent, laid out by `layout`. Each box links to
//! the task's details. Pure.

use std::collections::HashMap;
use std::fmt::Write;

use super::escape::{attr, clip, text};
use super::layout::{self, NODE_H, NODE_W};
use super::state_class;
use crate::report::document::ReportDocument;

/// Longest task ref drawn in a box (the whole ref is in its tooltip).
const REF_CHARS_MAX: usize = 20;
const LABEL_CHARS_MAX: usize = 26;

/// Dependency → dependent edges by task index, in plan order.
pub fn edges(doc: &ReportDocument) -> Vec<(usize, usize)> {
    let index: HashMap<&str, usize> = doc.tasks.iter().enumerate().map(|(i, t)| (t.task_ref.as_str(), i)).collect();
    let mut out = Vec::new();
    for (i, t) in doc.tasks.iter().enumerate() {
        for d in &t.depends_on {
            if let Some(&j) = index.get(d.as_str()) {
                out.push((j, i));
            }
        }
    }
    out
}

pub fn svg(doc: &ReportDocument, out: &mut String) {
    let edges = edges(doc);
    let l = layout::layout(doc.tasks.len(), &edges);
    let _ = write!(
        out,
        "<svg id=\"dag-svg\" class=\"dag\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" \
         data-width=\"{w}\" data-height=\"{h}\" role=\"img\" aria-label=\"task graph\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs><g class=\"edges\">",
        w = l.width,
        h = l.height
    );
    for (k, &(a, b)) in edges.iter().enumerate() {
        let Some(route) = l.routes.get(k).filter(|r| r.len() >= 2) else { continue };
        let _ = write!(
            out,
            "<path class=\"edge\" data-from=\"{a}\" data-to=\"{b}\" d=\"{}\" marker-end=\"url(#arrow)\"/>",
            path(route)
        );
    }
    out.push_str("</g><g class=\"nodes\">");
    for (i, t) in doc.tasks.iter().enumerate() {
        let (x, y) = (l.x[i], l.y[i]);
        let label = match &t.upstream {
            Some(u) => format!("{} · upstream {}", u.word(), u.task_ref_state().1),
            None => node_label(&t.state, t.class.as_deref()),
        };
        // The tip (what a screen reader says, and a pointer shows) names the
        // state whole even where the box says only a failure's class.
        let whole = match (&t.upstream, &t.class) {
            (None, Some(c)) => format!("{} · {c}", t.state),
            _ => label.clone(),
        };
        let tip = format!(
            "{} — {}{}",
            t.task_ref,
            whole,
            if t.title.is_empty() { String::new() } else { format!(" — {}", t.title) }
        );
        let _ = write!(
            out,
            "<a class=\"node {cls}\" href=\"#task-{i}\" data-i=\"{i}\" data-ref=\"{r}\" data-state=\"{s}\">\
             <title>{tip}</title><rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"6\"/>\
             <text class=\"ref\" x=\"{tx}\" y=\"{y1}\">{rt}</text><text class=\"st\" x=\"{tx}\" y=\"{y2}\">{lt}</text></a>",
            cls = state_class("st", &t.state),
            r = attr(&t.task_ref),
            s = attr(&t.state),
            tip = text(&tip),
            tx = x + 8,
            y1 = y + 18,
            y2 = y + 35,
            rt = text(&clip(&t.task_ref, REF_CHARS_MAX)),
            lt = text(&clip(&label, LABEL_CHARS_MAX)),
        );
    }
    out.push_str("</g></svg>");
}

/// What a box says under its ref: its state, and a failure's class (a
/// failed box is red, so its class alone says it whole: the longest,
/// `constraint_violated`, is never cut).
fn node_label(state: &str, class: Option<&str>) -> String {
    match class {
        Some(c) if state == "failed" => c.to_string(),
        Some(c) => format!("{state} · {c}"),
        None => state.to_string(),
    }
}

/// Straight through a layer, a vertical S-curve between layers.
fn path(points: &[(i64, i64)]) -> String {
    let mut d = String::new();
    let mut prev = points[0];
    let _ = write!(d, "M{},{}", prev.0, prev.1);
    for &p in &points[1..] {
        if p.0 == prev.0 {
            let _ = write!(d, "L{},{}", p.0, p.1);
        } else {
            let mid = (prev.1 + p.1) / 2;
            let _ = write!(d, "C{},{} {},{} {},{}", prev.0, mid, p.0, mid, p.0, p.1);
        }
        prev = p;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::FailureClass;

    #[test]
    fn every_failure_class_fits_its_box_whole() {
        for c in FailureClass::ALL {
            let label = node_label("failed", Some(c.as_str()));
            assert_eq!(clip(&label, LABEL_CHARS_MAX), label, "cut in the graph");
        }
        assert_eq!(node_label("succeeded", None), "succeeded");
    }
}
