//! "Did you mean": the closest known name to a misspelt one (a field, a
//! task ref, a provider), by Jaro-Winkler similarity (`strsim`), or one
//! edit away (Jaro-Winkler sees no likeness in a swapped two-letter name).

/// How alike two names must be to suggest one for the other (1.0: equal).
const SIMILARITY_MIN: f64 = 0.8;

/// The known name most like `word`, if one is alike enough.
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|k| *k != word)
        .map(|k| (likeness(word, k), k))
        .filter(|(score, _)| *score >= SIMILARITY_MIN)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// Jaro-Winkler similarity, raised to the threshold for names one edit
/// (insertion, deletion, substitution, swap of neighbours) apart.
fn likeness(word: &str, known: &str) -> f64 {
    let jw = strsim::jaro_winkler(word, known);
    if strsim::osa_distance(word, known) <= 1 {
        jw.max(SIMILARITY_MIN)
    } else {
        jw
    }
}

/// `"; did you mean `x`?"`, or nothing.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, known).map(|k| format!("; did you mean `{k}`?")).unwrap_or_default()
}

/// The names serde lists in "unknown field `x`, expected one of `a`, `b`"
/// (or "expected `a` or `b`").
pub fn expected_in_serde_message(msg: &str) -> Vec<&str> {
    let Some((_, expected)) = msg.split_once("expected") else { return Vec::new() };
    expected.split('`').skip(1).step_by(2).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested_and_far_ones_are_not() {
        assert_eq!(closest("efect", ["effect", "inputs", "title"]), Some("effect"));
        assert_eq!(closest("depend_on", ["depends_on", "inputs"]), Some("depends_on"));
        assert_eq!(closest("T3", ["T1", "T2", "T30"]), Some("T30"));
        assert_eq!(closest("colour", ["ref", "title", "provider"]), None);
        assert_eq!(closest("x", std::iter::empty()), None);
        assert_eq!(closest("hs", ["sh", "http"]), Some("sh"), "a swap in a short name");
        assert_eq!(closest("a", ["bc"]), None);
        assert_eq!(did_you_mean("shh", ["sh", "http"]), "; did you mean `sh`?");
        assert_eq!(did_you_mean("zzz", ["sh"]), "");
    }

    #[test]
    fn serde_lists_are_read() {
        let msg = "unknown field `efect`, expected one of `ref`, `title`, `effect`";
        assert_eq!(expected_in_serde_message(msg), vec!["ref", "title", "effect"]);
        assert_eq!(expected_in_serde_message("unknown field `x`, expected `a` or `b`"), vec!["a", "b"]);
        assert_eq!(expected_in_serde_message("unknown field `x`, there are no fields"), Vec::<&str>::new());
    }
}
