//! Server-Sent Events, as a Streamable HTTP MCP server answers a POST: the
//! `data:` lines of each event, joined, are one JSON-RPC message. Pure:
//! bytes in, complete events out.

/// Room on a line for the field name before the data's bound applies.
const LINE_SLACK: usize = 64;

/// One event's data; `truncated` when it went over the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub data: String,
    pub truncated: bool,
}

/// An incremental SSE parser with a bound on one event's data.
#[derive(Debug)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    event_bytes_max: usize,
    /// The event being read went over the bound (its data was cut).
    overflowed: bool,
}

impl SseParser {
    pub fn new(event_bytes_max: usize) -> Self {
        SseParser { line: Vec::new(), data: Vec::new(), has_data: false, event_bytes_max, overflowed: false }
    }

    /// Feed bytes; returns the data of every event they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() < self.event_bytes_max.saturating_add(LINE_SLACK) {
                    self.line.push(b);
                } else {
                    self.overflowed = true;
                }
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            if let Some(done) = self.take_line(&line) {
                events.push(done);
            }
        }
        events
    }

    /// One complete line; `Some(data)` when it ends an event.
    fn take_line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            let had = std::mem::take(&mut self.has_data);
            let data = std::mem::take(&mut self.data);
            let truncated = std::mem::take(&mut self.overflowed);
            return had.then(|| Event { data: String::from_utf8_lossy(&data).into_owned(), truncated });
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(0) => return None, // a comment
            Some(i) => (&line[..i], line.get(i + 1..).unwrap_or_default()),
            None => (line, &[][..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.has_data {
                self.data.push(b'\n');
            }
            let room = self.event_bytes_max.saturating_sub(self.data.len());
            if value.len() > room {
                self.overflowed = true;
            }
            self.data.extend_from_slice(&value[..value.len().min(room)]);
            self.has_data = true;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_across_chunks() {
        let ev = |d: &str| Event { data: d.to_string(), truncated: false };
        let mut p = SseParser::new(1000);
        assert_eq!(p.feed(b"id: 1\r\ndata:\r\n\r\n"), vec![ev("")], "a priming event has empty data");
        assert!(p.feed(b": comment\nevent: message\ndata: {\"a\":").is_empty());
        assert_eq!(p.feed(b"1}\n\n"), vec![ev("{\"a\":1}")]);
        assert_eq!(p.feed(b"data: x\ndata: y\n\nretry: 5\n\n"), vec![ev("x\ny")]);
    }

    #[test]
    fn bounded() {
        let mut p = SseParser::new(4);
        let out = p.feed(b"data: 123456789\n\ndata: 12\n\n");
        assert_eq!(out[0], Event { data: "1234".into(), truncated: true });
        assert_eq!(out[1], Event { data: "12".into(), truncated: false });
    }
}
