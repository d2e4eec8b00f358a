//! The timeline as SVG: one row per task, a bar per attempt from intent to
//! finish (queue, provider call, validations), validation results marked,
//! a strip of how many attempts were in flight, and long idle gaps (a
//! person's approval an hour later) drawn short and labelled. Pure.

use std::fmt::Write;

use super::escape::{attr, clip, text};
use super::{duration, state_class};
use crate::evidence::Evidence;
use crate::report::document::timeline::attempt_end;
use crate::report::document::{AttemptReport, ReportDocument};

const LABEL_W: f64 = 170.0;
const CHART_W: f64 = 900.0;
const RIGHT_W: f64 = 90.0;
const ROW_H: i64 = 20;
const STRIP_H: i64 = 40;
const AXIS_H: i64 = 22;
const GAP_PX: f64 = 26.0;
const REF_CHARS_MAX: usize = 22;

/// Time to x: linear over busy stretches, a fixed short width for each
/// idle gap longer than a fifth of the busy time (and than 2 s).
pub struct Scale {
    /// (start ms, end ms, x at start, x at end, is a gap)
    pieces: Vec<(i64, i64, f64, f64, bool)>,
}

impl Scale {
    pub fn new(spans: &[(i64, i64)], x0: f64, width: f64) -> Scale {
        let mut merged: Vec<(i64, i64)> = Vec::new();
        let mut sorted = spans.to_vec();
        sorted.sort_unstable();
        for (s, e) in sorted {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let busy: i64 = merged.iter().map(|(s, e)| e - s).sum();
        let gaps: Vec<(i64, i64)> = merged.windows(2).map(|w| (w[0].1, w[1].0)).collect();
        let idle = |g: &(i64, i64)| g.1 - g.0 > (busy / 5).max(2000);
        let idle_n = gaps.iter().filter(|g| idle(g)).count() as f64;
        let linear_ms: i64 = merged.last().map_or(0, |l| l.1)
            - merged.first().map_or(0, |f| f.0)
            - gaps.iter().filter(|g| idle(g)).map(|g| g.1 - g.0).sum::<i64>();
        let per_ms = if linear_ms > 0 { (width - idle_n * GAP_PX).max(0.0) / linear_ms as f64 } else { 0.0 };
        let mut pieces = Vec::new();
        let mut x = x0;
        let mut cuts: Vec<(i64, i64, bool)> = Vec::new();
        for (k, m) in merged.iter().enumerate() {
            cuts.push((m.0, m.1, false));
            if let Some(g) = gaps.get(k) {
                cuts.push((g.0, g.1, idle(g)));
            }
        }
        for (s, e, gap) in cuts {
            let w = if gap { GAP_PX } else { (e - s) as f64 * per_ms };
            pieces.push((s, e, x, x + w, gap));
            x += w;
        }
        Scale { pieces }
    }

    pub fn x(&self, t: i64) -> f64 {
        let i = self.pieces.partition_point(|p| p.1 < t);
        match self.pieces.get(i).or(self.pieces.last()) {
            None => LABEL_W,
            Some(&(s, e, x0, x1, _)) if e > s => x0 + (x1 - x0) * ((t.clamp(s, e) - s) as f64 / (e - s) as f64),
            Some(&(_, _, x0, _, _)) => x0,
        }
    }

    fn gaps(&self) -> impl Iterator<Item = &(i64, i64, f64, f64, bool)> {
        self.pieces.iter().filter(|p| p.4)
    }
}

/// The rows, in the order the tasks first ran (then the rest in plan order).
fn rows(doc: &ReportDocument) -> Vec<usize> {
    let n = doc.revision.number;
    let first = |i: usize| doc.tasks[i].attempts.iter().filter(|a| a.revision == n).map(|a| a.intent_at_ms).min();
    let mut idx: Vec<usize> = (0..doc.tasks.len()).collect();
    idx.sort_by_key(|&i| (first(i).is_none(), first(i), i));
    idx
}

pub fn svg(doc: &ReportDocument, out: &mut String) {
    let n = doc.revision.number;
    let spans: Vec<(i64, i64)> = doc
        .tasks
        .iter()
        .flat_map(|t| &t.attempts)
        .filter(|a| a.revision == n)
        .map(|a| (a.intent_at_ms, attempt_end(a)))
        .chain(doc.timeline.acceptance.iter().map(|m| (m.at_ms, m.at_ms)))
        .collect();
    let scale = Scale::new(&spans, LABEL_W, CHART_W);
    let order = rows(doc);
    let top = STRIP_H + AXIS_H;
    let height = top + ROW_H * (order.len() as i64 + 1) + 8;
    let width = LABEL_W + CHART_W + RIGHT_W;
    let _ = write!(out, "<svg id=\"timeline-svg\" class=\"timeline\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"timeline of attempts\">");
    strip(doc, &scale, out);
    axis(doc, &scale, height, out);
    for (row, &i) in order.iter().enumerate() {
        task_row(doc, i, top + ROW_H * row as i64, &scale, out);
    }
    acceptance_row(doc, top + ROW_H * order.len() as i64, &scale, out);
    out.push_str("</svg>");
}

/// How many attempts were in flight, as a step area.
fn strip(doc: &ReportDocument, scale: &Scale, out: &mut String) {
    let t = &doc.timeline;
    let base = STRIP_H - 4;
    let unit = if t.max_parallel > 0 { (STRIP_H - 10) as f64 / t.max_parallel as f64 } else { 0.0 };
    let _ = write!(
        out,
        "<text class=\"lbl\" x=\"4\" y=\"{}\">in flight (max {})</text><path class=\"strip\" d=\"M{:.1},{base}",
        base - 8,
        t.max_parallel,
        scale.x(t.start_ms.unwrap_or(0))
    );
    for s in &t.concurrency {
        let _ = write!(out, "H{:.1}V{:.1}", scale.x(s.at_ms), base as f64 - s.running as f64 * unit);
    }
    let _ = write!(out, "V{base}z\"/>");
}

fn axis(doc: &ReportDocument, scale: &Scale, height: i64, out: &mut String) {
    let Some(start) = doc.timeline.start_ms else { return };
    let busy = scale.pieces.iter().filter(|p| !p.4).map(|p| p.1 - p.0).sum::<i64>().max(1);
    let step = [1, 2, 5]
        .iter()
        .flat_map(|m| (0..10).map(move |p| m * 10i64.pow(p)))
        .filter(|s| busy / s <= 10)
        .min()
        .unwrap_or(busy);
    let y = STRIP_H + AXIS_H - 6;
    for &(s, e, _, _, _) in scale.pieces.iter().filter(|p| !p.4) {
        let mut t = start + (s - start + step - 1).div_euclid(step) * step;
        while t <= e {
            let x = scale.x(t);
            let _ = write!(out, "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y}\" y2=\"{height}\"/><text class=\"ax\" x=\"{:.1}\" y=\"{}\">+{}</text>", x + 2.0, y - 2, duration(t - start));
            t += step;
        }
    }
    for &(s, e, x0, x1, _) in scale.gaps() {
        let _ = write!(out, "<rect class=\"gap\" x=\"{x0:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\"><title>{} idle, drawn short</title></rect><text class=\"ax gaplbl\" x=\"{:.1}\" y=\"{}\">⋯</text>", x1 - x0, height - y, duration(e - s), x0 + 6.0, y - 2);
    }
}

fn task_row(doc: &ReportDocument, i: usize, y: i64, scale: &Scale, out: &mut String) {
    let t = &doc.tasks[i];
    let n = doc.revision.number;
    let attempts: Vec<&AttemptReport> = t.attempts.iter().filter(|a| a.revision == n).collect();
    let _ = write!(
        out,
        "<a class=\"trow\" href=\"#task-{i}\" data-i=\"{i}\"><title>{}</title><rect class=\"hit\" x=\"0\" y=\"{y}\" width=\"{}\" height=\"{ROW_H}\"/><text class=\"lbl {}\" x=\"4\" y=\"{}\">{}</text>",
        text(&format!("{} — {}", t.task_ref, t.state)),
        LABEL_W + CHART_W + RIGHT_W,
        state_class("st", &t.state),
        y + 14,
        text(&clip(&t.task_ref, REF_CHARS_MAX))
    );
    for a in &attempts {
        bar(doc, a, y, scale, out);
    }
    let right = if attempts.is_empty() {
        match &t.reuse {
            Some(r) if r.decision == "reuse" => "reused".to_string(),
            _ => t.state.clone(),
        }
    } else {
        duration(attempts.iter().map(|a| attempt_end(a) - a.intent_at_ms).sum())
    };
    let _ = write!(
        out,
        "<text class=\"dur\" x=\"{:.1}\" y=\"{}\">{}</text></a>",
        LABEL_W + CHART_W + 6.0,
        y + 14,
        text(&right)
    );
}

/// One attempt: queue (intent → dispatch), call (→ receipt), checks
/// (→ finish); an attempt with no receipt runs dashed to the end.
fn bar(doc: &ReportDocument, a: &AttemptReport, y: i64, scale: &Scale, out: &mut String) {
    let end = attempt_end(a);
    let (yb, h) = (y + 4, ROW_H - 8);
    let tip = format!(
        "attempt {} · try {} · {} · {} · {}",
        a.number,
        a.try_no,
        a.kind,
        a.state,
        duration(end - a.intent_at_ms)
    );
    let _ = write!(
        out,
        "<g class=\"att {}\" data-attempt=\"{}\"><title>{}</title>",
        state_class("as", &a.state),
        a.id,
        text(&tip)
    );
    let dispatched = a.dispatched_at_ms.unwrap_or(end).min(end);
    let received = a.receipt_at_ms.unwrap_or(end).clamp(dispatched, end);
    for (class, s, e) in
        [("queue", a.intent_at_ms, dispatched), ("call", dispatched, received), ("checks", received, end)]
    {
        let (x0, x1) = (scale.x(s), scale.x(e));
        if e > s || class == "call" {
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{x0:.1}\" y=\"{yb}\" width=\"{:.1}\" height=\"{h}\"/>",
                (x1 - x0).max(2.0)
            );
        }
    }
    if a.receipt_at_ms.is_none() && a.dispatched_at_ms.is_some() {
        let x1 = scale.x(doc.timeline.end_ms.unwrap_or(end));
        let _ = write!(
            out,
            "<line class=\"noreceipt\" x1=\"{:.1}\" x2=\"{x1:.1}\" y1=\"{}\" y2=\"{}\"/>",
            scale.x(end) + 2.0,
            yb + h / 2,
            yb + h / 2
        );
    }
    for e in &a.evidence {
        if let Evidence::CheckResult { check_id, passed, .. } = &e.evidence {
            let x = scale.x(e.at_ms);
            let _ = write!(
                out,
                "<path class=\"vmark {}\" d=\"M{x:.1},{}l4,6l-4,6l-4,-6z\"><title>{} {}</title></path>",
                if *passed { "pass" } else { "fail" },
                y + 4,
                attr(check_id),
                if *passed { "passed" } else { "FAILED" }
            );
        }
    }
    out.push_str("</g>");
}

fn acceptance_row(doc: &ReportDocument, y: i64, scale: &Scale, out: &mut String) {
    let _ = write!(out, "<text class=\"lbl\" x=\"4\" y=\"{}\">acceptance</text>", y + 14);
    for m in &doc.timeline.acceptance {
        let x = scale.x(m.at_ms);
        let _ = write!(
            out,
            "<path class=\"vmark {}\" d=\"M{x:.1},{}l5,7l-5,7l-5,-7z\"><title>{} {}</title></path>",
            if m.passed { "pass" } else { "fail" },
            y + 3,
            text(&m.check_id),
            if m.passed { "passed" } else { "FAILED" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Scale;

    #[test]
    fn long_idle_gaps_are_drawn_short() {
        // 10 s of work, an hour idle, 10 s of work.
        let s = Scale::new(&[(0, 10_000), (3_610_000, 3_620_000)], 0.0, 1000.0);
        let gap = s.x(3_610_000) - s.x(10_000);
        assert!((gap - super::GAP_PX).abs() < 0.01, "{gap}");
        assert!((s.x(3_620_000) - 1000.0).abs() < 0.01);
        assert!(s.x(5_000) < s.x(10_000));
    }

    #[test]
    fn a_short_gap_stays_to_scale() {
        let s = Scale::new(&[(0, 10_000), (11_000, 20_000)], 0.0, 2000.0);
        assert!((s.x(11_000) - 1100.0).abs() < 0.01, "{}", s.x(11_000));
    }
}
