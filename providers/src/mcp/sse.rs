//! Server-Sent Events, as a Streamable HTTP MCP server answers a POST (or
//! a GET): the `data:` lines of each event, joined, are one JSON-RPC
//! message. Pure: bytes in, complete events out; and what a client needs
//! to resume the stream after the server closed it (SEP-1699): the last
//! event id and the `retry` the server asked for.

/// Room on a line for the field name before the data's bound applies.
const LINE_SLACK: usize = 64;
/// Bound on an event id kept to resume with (a longer one is not kept).
pub(crate) const EVENT_ID_BYTES_MAX: usize = 1024;

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
    /// The `id` field last read (the event stream's "last event ID
    /// buffer"), and the one the last complete event carried.
    pending_id: Option<String>,
    last_id: Option<String>,
    /// The reconnection time the server asked for (`retry`), in ms.
    retry_ms: Option<u64>,
}

impl SseParser {
    pub fn new(event_bytes_max: usize) -> Self {
        SseParser {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event_bytes_max,
            overflowed: false,
            pending_id: None,
            last_id: None,
            retry_ms: None,
        }
    }

    /// The id of the last complete event (even one without data, as a
    /// priming event is): what `Last-Event-ID` resumes from.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// A new connection of the same stream (a resumption): what was left
    /// of an unfinished event goes, the last event id and `retry` stay.
    pub fn restart(&mut self) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.overflowed = false;
    }

    /// The server's `retry`, if it gave one.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
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
            // An event ends: its id (the buffer, which outlives events) is
            // the last one, whether or not it carried data.
            self.last_id.clone_from(&self.pending_id);
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
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"data" => self.push_data(value),
            // An id with NUL is ignored (the SSE rules), as is one with any
            // control character (a bare CR must not reach a header); an
            // empty one clears it; a huge one is not kept.
            b"id" => match std::str::from_utf8(value) {
                Ok(id) if !id.chars().any(char::is_control) && id.len() <= EVENT_ID_BYTES_MAX => {
                    self.pending_id = (!id.is_empty()).then(|| id.to_string())
                }
                _ => {}
            },
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
        None
    }

    fn push_data(&mut self, value: &[u8]) {
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
        assert_eq!((p.last_event_id(), p.retry_ms()), (Some("1"), Some(5)));
    }

    #[test]
    fn the_last_event_id_is_the_last_complete_events() {
        let mut p = SseParser::new(1000);
        assert_eq!(p.last_event_id(), None);
        p.feed(b"id: e-1\nretry: 500\ndata: \n\n");
        assert_eq!((p.last_event_id(), p.retry_ms()), (Some("e-1"), Some(500)));
        // An id whose event never ended is not the last one yet.
        p.feed(b"id: e-2\ndata: {\"a\":1}");
        assert_eq!(p.last_event_id(), Some("e-1"));
        p.feed(b"\n\n");
        assert_eq!(p.last_event_id(), Some("e-2"));
        // The id buffer outlives its event; a bad retry is ignored.
        p.feed(b"retry: soon\ndata: x\n\n");
        assert_eq!((p.last_event_id(), p.retry_ms()), (Some("e-2"), Some(500)));
        p.feed(b"id: a\0b\n\nid: a\rb\n\n");
        assert_eq!(p.last_event_id(), Some("e-2"), "an id with NUL or a bare CR is ignored");
        p.feed(b"id:\n\n");
        assert_eq!(p.last_event_id(), None, "an empty id clears it");
    }

    #[test]
    fn bounded() {
        let mut p = SseParser::new(4);
        let out = p.feed(b"data: 123456789\n\ndata: 12\n\n");
        assert_eq!(out[0], Event { data: "1234".into(), truncated: true });
        assert_eq!(out[1], Event { data: "12".into(), truncated: false });
    }
}
