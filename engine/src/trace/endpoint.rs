//! Where a run's trace goes: `--otlp URL`, else the OpenTelemetry
//! variables, as the OTLP exporter specification reads them. Pure: the
//! values come in, a URL (or nothing) comes out.
//!
//! | source | URL used |
//! | --- | --- |
//! | `--otlp URL` | the collector's base URL with `/v1/traces` appended, or as given when its path already ends in `/v1/traces` |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | as given (the specification's signal-specific URL) |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | the base URL with `v1/traces` appended to its path |
//!
//! The flag wins over both variables; an empty variable is unset.

/// The signal-specific variable, used as is.
pub const TRACES_VARIABLE: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The base variable, `v1/traces` appended.
pub const BASE_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_PATH: &str = "v1/traces";

/// Where the trace is sent, and what said so (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub from: &'static str,
}

/// A value that is no OTLP/HTTP URL: where it came from, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub place: &'static str,
    pub why: String,
}

/// The endpoint from the flag and the two variables' values (`None`:
/// no trace is exported, and nothing is sent anywhere).
pub fn resolve(flag: Option<&str>, traces: Option<&str>, base: Option<&str>) -> Result<Option<Endpoint>, Refused> {
    fn set(v: Option<&str>) -> Option<&str> {
        v.filter(|s| !s.is_empty())
    }
    let (from, url) = if let Some(url) = flag {
        ("--otlp", with_path(check("--otlp", url)?, true))
    } else if let Some(url) = set(traces) {
        (TRACES_VARIABLE, check(TRACES_VARIABLE, url)?.to_string())
    } else if let Some(url) = set(base) {
        (BASE_VARIABLE, with_path(check(BASE_VARIABLE, url)?, false))
    } else {
        return Ok(None);
    };
    Ok(Some(Endpoint { url, from }))
}

/// An `http://` or `https://` URL with a host, no whitespace, no control
/// character, no fragment.
fn check<'a>(place: &'static str, url: &'a str) -> Result<&'a str, Refused> {
    let refuse = |why: &str| Err(Refused { place, why: format!("`{url}` {why}") });
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return refuse("holds whitespace or a control character");
    }
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return refuse("is not an http:// or https:// URL (OTLP over HTTP)");
    };
    if rest.split(['/', '?']).next().unwrap_or("").is_empty() {
        return refuse("names no host");
    }
    if url.contains('#') {
        return refuse("has a fragment");
    }
    Ok(url)
}

/// `url` with `v1/traces` appended to its path (after one `/`), the query
/// kept; the flag's URL as given when it already names the traces path.
fn with_path(url: &str, keep_full: bool) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    if keep_full && base.trim_end_matches('/').ends_with(TRACES_PATH) {
        return url.to_string();
    }
    let mut out = format!("{}/{TRACES_PATH}", base.trim_end_matches('/'));
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(flag: Option<&str>, traces: Option<&str>, base: Option<&str>) -> Option<(String, &'static str)> {
        resolve(flag, traces, base).unwrap().map(|e| (e.url, e.from))
    }

    #[test]
    fn nothing_set_is_no_trace() {
        assert_eq!(url(None, None, None), None);
        assert_eq!(url(None, Some(""), Some("")), None, "an empty variable is unset");
    }

    #[test]
    fn the_base_variable_gets_the_traces_path_appended() {
        let want = Some(("http://127.0.0.1:4318/v1/traces".to_string(), BASE_VARIABLE));
        assert_eq!(url(None, None, Some("http://127.0.0.1:4318")), want);
        assert_eq!(url(None, None, Some("http://127.0.0.1:4318/")), want);
        assert_eq!(url(None, None, Some("https://c.example/otlp")).unwrap().0, "https://c.example/otlp/v1/traces");
    }

    #[test]
    fn the_signal_variable_is_used_as_is_and_wins_over_the_base() {
        assert_eq!(
            url(None, Some("http://h:1/custom"), Some("http://other:2")),
            Some(("http://h:1/custom".to_string(), TRACES_VARIABLE))
        );
    }

    #[test]
    fn the_flag_wins_and_is_a_base_unless_it_names_the_traces_path() {
        assert_eq!(
            url(Some("http://f:3"), Some("http://h:1/x"), Some("http://b:2")),
            Some(("http://f:3/v1/traces".to_string(), "--otlp"))
        );
        assert_eq!(url(Some("http://f:3/v1/traces"), None, None).unwrap().0, "http://f:3/v1/traces");
    }

    #[test]
    fn a_bad_url_is_refused_at_its_place() {
        let r = resolve(Some("localhost:4318"), None, None).unwrap_err();
        assert_eq!(r.place, "--otlp");
        assert!(r.why.contains("not an http:// or https://"), "{}", r.why);
        assert_eq!(resolve(None, None, Some("http:///x")).unwrap_err().place, BASE_VARIABLE);
        assert_eq!(resolve(None, Some("http://a b"), None).unwrap_err().place, TRACES_VARIABLE);
    }
}
