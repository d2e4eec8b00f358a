//! `engine report --html`: the report document as one self-contained page.
//! Pure — it takes the `ReportDocument` and returns the bytes, so the same
//! document always gives the same page. Every ledger string goes through
//! `escape`; the page fetches nothing (a Content-Security-Policy forbids
//! it), and its script and style run only under a nonce that no text of
//! the ledger can carry, so nothing a provider printed can run as script.

pub mod dag;
mod details;
pub mod escape;
pub mod layout;
mod summary;
#[cfg(test)]
mod tests;
pub mod timeline;

use std::fmt::Write;

use crate::report::document::ReportDocument;

const CSS: &str = include_str!("assets/report.css");
const JS: &str = include_str!("assets/report.js");

pub fn render(doc: &ReportDocument) -> String {
    let mut body = String::with_capacity(4096 + doc.tasks.len() * 3072);
    summary::header(doc, &mut body);
    summary::tampered(doc, &mut body);
    summary::waiting(doc, &mut body);
    summary::goal_tables(doc, &mut body);
    graph_section(doc, &mut body);
    timeline_section(doc, &mut body);
    body.push_str("<section id=\"tasks\"><h2>Tasks</h2><p class=\"muted\">Click a task in the graph or the timeline to see it here.</p>");
    details::tasks(doc, &mut body);
    body.push_str("</section>");
    summary::footer(doc, &mut body);
    body.push_str("<aside id=\"panel\" hidden><button type=\"button\" id=\"panel-close\" title=\"close\">×</button><div id=\"panel-body\"></div></aside>");
    let nonce = nonce(&body);
    let title = format!("engine report — goal {} revision {}", doc.goal.id, doc.revision.number);
    let mut page = String::with_capacity(body.len() + CSS.len() + JS.len() + 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'nonce-{nonce}'; \
         script-src 'nonce-{nonce}'; img-src 'none'; base-uri 'none'; form-action 'none'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta name=\"referrer\" content=\"no-referrer\">\
         <title>{}</title><style nonce=\"{nonce}\">{CSS}</style></head><body>{body}<script nonce=\"{nonce}\">{JS}</script></body></html>\n",
        escape::text(&title)
    );
    page
}

/// The page's script and style nonce: a digest of everything else on the
/// page, so the same document keeps the same bytes, while no text in the
/// ledger can know it (it would have to contain its own digest).
fn nonce(body: &str) -> String {
    let hash = blake3::Hasher::new_derive_key("engine report html nonce v1")
        .update(body.as_bytes())
        .update(CSS.as_bytes())
        .update(JS.as_bytes())
        .finalize();
    hash.to_hex()[..32].to_string()
}

fn graph_section(doc: &ReportDocument, out: &mut String) {
    let layers = layout::layout(doc.tasks.len(), &dag::edges(doc)).layer.iter().max().map_or(0, |m| m + 1);
    let _ = write!(
        out,
        "<section id=\"graph\"><h2>Task graph of revision {}</h2><p class=\"muted\">{} in {}, \
         dependencies above their dependents. Scroll to zoom, drag to pan; click a task for its details.</p>\
         <div class=\"toolbar\"><button type=\"button\" data-zoom=\"fit\">fit</button><button type=\"button\" data-zoom=\"in\">+</button>\
         <button type=\"button\" data-zoom=\"out\">−</button><button type=\"button\" data-zoom=\"one\">1:1</button>\
         <label>find <input id=\"find\" list=\"refs\" placeholder=\"task ref\" autocomplete=\"off\"></label>\
         <label>show <select id=\"filter\"><option value=\"\">every state</option>",
        doc.revision.number,
        crate::report::count(doc.tasks.len(), "task"),
        crate::report::count(layers, "layer")
    );
    let mut states: Vec<&str> = doc.tasks.iter().map(|t| t.state.as_str()).collect();
    states.sort_unstable();
    states.dedup();
    for s in states {
        let _ = write!(out, "<option value=\"{}\">{}</option>", escape::attr(s), escape::text(s));
    }
    out.push_str("</select></label></div><datalist id=\"refs\">");
    for t in &doc.tasks {
        let _ = write!(out, "<option value=\"{}\">", escape::attr(&t.task_ref));
    }
    out.push_str("</datalist><div id=\"dag-view\" class=\"view\">");
    dag::svg(doc, out);
    out.push_str("</div></section>");
}

fn timeline_section(doc: &ReportDocument, out: &mut String) {
    let t = &doc.timeline;
    let n = doc.revision.number;
    let attempts = doc.tasks.iter().flat_map(|t| &t.attempts).filter(|a| a.revision == n).count();
    let span = match (t.start_ms, t.end_ms) {
        (Some(s), Some(e)) => format!("from {} to {} ({})", time(s), time(e), duration(e - s)),
        _ => "nothing ran in this revision".to_string(),
    };
    let runs: Vec<String> = doc
        .revision
        .runs
        .iter()
        .map(|r| format!("{}{}", time(r.started_at_ms), r.jobs.map(|j| format!(" (--jobs {j})")).unwrap_or_default()))
        .collect();
    let _ = write!(
        out,
        "<section id=\"timeline\"><h2>Timeline of revision {n}</h2><p>{attempts} attempt(s) {span}; \
         <b>at most {} in flight at once</b>. Engine runs: {}.</p><p class=\"muted\">A bar runs from the intent \
         to the end of the attempt: light while queued, solid during the provider call, hatched during its \
         validations; ◆ marks a validation result; a dashed tail means no receipt.</p><div class=\"view tl\">",
        t.max_parallel,
        if runs.is_empty() { "none recorded".to_string() } else { escape::text(&runs.join(", ")) }
    );
    timeline::svg(doc, out);
    out.push_str("</div></section>");
}

/// A CSS class from a state word (`st-failed`): only `[a-z_]` survives.
pub fn state_class(prefix: &str, state: &str) -> String {
    let word: String = state.chars().filter(|c| c.is_ascii_lowercase() || *c == '_').collect();
    format!("{prefix}-{word}")
}

/// `1.23 s`, `2 min 05 s`, `1 h 02 min`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.2} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// UTC time with milliseconds.
pub fn time(ms: i64) -> String {
    format!("{}.{:03}", crate::clock::utc(ms), ms.rem_euclid(1000))
}
