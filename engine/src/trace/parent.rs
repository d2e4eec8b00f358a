//! W3C Trace Context's `traceparent` (version 00): read a caller's, write
//! the one each provider call is sent. Pure.

/// A `traceparent`'s fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// `00-TRACE-SPAN-FLAGS`, lower-case hex.
    pub fn header(&self) -> String {
        format!("00-{}-{}-{:02x}", hex(&self.trace_id), hex(&self.span_id), self.flags)
    }
}

/// Parse a `traceparent` as W3C Trace Context says a receiver must:
/// version `00` exactly 55 characters; a later version (not `ff`) read by
/// its first four fields, more only after a `-`; lower-case hex; a trace
/// id and a parent id that are not all zeros.
pub fn parse(value: &str) -> Result<TraceParent, String> {
    let v = value.trim_matches([' ', '\t']);
    let field = |at: std::ops::Range<usize>| {
        v.get(at).filter(|s| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    };
    let version = field(0..2).ok_or("its version is not two lower-case hex digits")?;
    if version == "ff" {
        return Err("version ff is invalid".into());
    }
    let exact = version == "00";
    if (exact && v.len() != 55) || (!exact && v.len() < 55) || (!exact && v.len() > 55 && v.as_bytes()[55] != b'-') {
        return Err(format!("it is {} characters long, not 55", v.len()));
    }
    if [2, 35, 52].iter().any(|&i| v.as_bytes()[i] != b'-') {
        return Err("its fields are not separated by `-` at the W3C places".into());
    }
    let (trace, span, flags) = (field(3..35), field(36..52), field(53..55));
    let (Some(trace), Some(span), Some(flags)) = (trace, span, flags) else {
        return Err("a field is not lower-case hex".into());
    };
    let parent = TraceParent {
        trace_id: unhex(trace).try_into().map_err(|_| "trace id")?,
        span_id: unhex(span).try_into().map_err(|_| "parent id")?,
        flags: u8::from_str_radix(flags, 16).map_err(|e| e.to_string())?,
    };
    if parent.trace_id == [0; 16] {
        return Err("its trace id is all zeros".into());
    }
    if parent.span_id == [0; 8] {
        return Err("its parent id is all zeros".into());
    }
    Ok(parent)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).filter_map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_w3c_example_reads_and_writes_back_the_same() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.flags, 1);
        assert_eq!(p.span_id, [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]);
        assert_eq!(p.header(), GOOD);
    }

    #[test]
    fn a_later_version_is_read_by_its_first_fields() {
        let p = parse("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next").unwrap();
        assert_eq!(p.header(), GOOD);
    }

    #[test]
    fn what_w3c_calls_invalid_is_refused() {
        for bad in [
            "",
            "garbage",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
