//! The run's timeline as numbers: each attempt's span, how many were in
//! flight at once, and the span of the whole revision. Pure.

use super::model::{AttemptReport, CheckMark, ConcurrencyStep, Timeline};

/// When an attempt stopped being in flight as far as the ledger knows:
/// its finish, else its receipt, else its dispatch, else its intent.
pub fn attempt_end(a: &AttemptReport) -> i64 {
    a.finished_at_ms.or(a.receipt_at_ms).or(a.dispatched_at_ms).unwrap_or(a.intent_at_ms).max(a.intent_at_ms)
}

/// The number of intervals open after each instant where it changes, and
/// the most at once. An interval ending when another starts does not
/// overlap it; an empty interval counts for nothing.
pub fn concurrency(intervals: &[(i64, i64)]) -> (Vec<ConcurrencyStep>, i64) {
    let mut points: Vec<(i64, i64)> = Vec::with_capacity(intervals.len() * 2);
    for &(start, end) in intervals {
        if end > start {
            points.push((start, 1));
            points.push((end, -1));
        }
    }
    // Ends before starts at the same instant.
    points.sort_unstable();
    let (mut steps, mut running, mut max) = (Vec::new(), 0i64, 0i64);
    let mut i = 0;
    while let Some(&(at, _)) = points.get(i) {
        while let Some(&(t, delta)) = points.get(i) {
            if t != at {
                break;
            }
            running += delta;
            i += 1;
        }
        max = max.max(running);
        steps.push(ConcurrencyStep { at_ms: at, running });
    }
    (steps, max)
}

/// The timeline of `revision` from its tasks' attempts and the acceptance
/// checks' marks.
pub fn timeline<'a>(attempts: impl Iterator<Item = &'a AttemptReport>, acceptance: Vec<CheckMark>) -> Timeline {
    let spans: Vec<(i64, i64)> = attempts.map(|a| (a.intent_at_ms, attempt_end(a))).collect();
    let (concurrency, max_parallel) = concurrency(&spans);
    let start_ms = spans.iter().map(|s| s.0).chain(acceptance.iter().map(|m| m.at_ms)).min();
    let end_ms = spans.iter().map(|s| s.1).chain(acceptance.iter().map(|m| m.at_ms)).max();
    Timeline { start_ms, end_ms, max_parallel, concurrency, acceptance }
}

#[cfg(test)]
mod tests {
    use super::concurrency;

    #[test]
    fn counts_overlaps_and_not_touching_ends() {
        let (steps, max) = concurrency(&[(0, 10), (5, 15), (10, 20), (30, 30)]);
        assert_eq!(max, 2);
        let got: Vec<(i64, i64)> = steps.iter().map(|s| (s.at_ms, s.running)).collect();
        assert_eq!(got, vec![(0, 1), (5, 2), (10, 2), (15, 1), (20, 0)]);
    }

    #[test]
    fn nothing_in_flight_is_zero() {
        assert_eq!(concurrency(&[]), (vec![], 0));
    }
}
