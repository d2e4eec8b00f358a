//! Rendering for people (text) and scripts (JSON). Reads only; every word
//! printed says no more than the ledger holds (SPEC.md's state table).

pub mod document;
pub mod escape;
pub mod explain;
pub mod goal_report;
pub mod html;
pub mod log;
pub mod plan;
pub mod run;
pub mod status;

/// `engine --version`: the package version and the source commit.
pub const VERSION: &str = env!("ENGINE_VERSION_LINE");

/// `s` left-aligned in a column of `width` characters (never shorter than
/// `s`). `format!`'s `{:width$}` panics on a width past 65,535; a table's
/// width comes from what it shows, so it is padded by hand.
pub fn pad(s: &str, width: usize) -> String {
    let len = s.chars().count();
    let mut out = String::with_capacity(s.len() + width.saturating_sub(len));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    out
}

/// The first 16 characters of a digest, as tables show it (all of a
/// shorter one: never a panic on what the ledger holds).
pub fn short(digest: &str) -> &str {
    digest.get(..16).unwrap_or(digest)
}

/// Format milliseconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pad_never_panics_on_wide_columns() {
        assert_eq!(super::pad("T1", 4), "T1  ");
        assert_eq!(super::pad("long", 2), "long");
        let wide = "r".repeat(70_000);
        assert_eq!(super::pad(&wide, 70_001).len(), 70_001);
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_795_000_000_000), "2026-11-18 11:06:40");
    }
}
