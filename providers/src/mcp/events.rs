//! An SSE stream of a Streamable HTTP server being read: the answer to a
//! POST (or its resumption by GET), or the session's standalone GET
//! stream. What the server sends besides the awaited answer goes where it
//! belongs as it comes: its questions to `Inbound` (answered from the
//! person's answers the call carries, else dismissed), its pings answered,
//! any other request refused (we offer no other client feature), its
//! notifications (progress) to `Inbound`. Each reply goes out through
//! `replies` at once: the server may be waiting on it before it answers;
//! a question held open for a person goes out as a reply to come
//! (`Reply::Later`), which the stream's reader sends when it is ready.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::inbound::{Inbound, Reply};
use super::jsonrpc::{self, Answer, Kind};
use super::sse::SseParser;
use crate::http::wire::{BodySink, Flow};

/// Bound on the server's requests answered within one POST's stream.
pub(crate) const STREAM_REQUESTS_MAX: usize = 16;

pub(crate) struct Events {
    /// The id of the request whose answer ends the stream (`None`: the
    /// standalone stream, which answers nothing of ours).
    awaited: Option<u64>,
    pub parser: SseParser,
    pub answer: Option<Answer>,
    /// Events read (with data or not): a stream that gave none was not
    /// worth reopening.
    pub events: u64,
    requests_seen: usize,
    requests_max: usize,
    inbound: Arc<Inbound>,
    replies: UnboundedSender<Reply>,
}

impl Events {
    pub fn new(
        awaited: Option<u64>,
        (bytes_max, requests_max): (usize, usize),
        inbound: Arc<Inbound>,
        replies: UnboundedSender<Reply>,
    ) -> Self {
        Events {
            awaited,
            parser: SseParser::new(bytes_max),
            answer: None,
            events: 0,
            requests_seen: 0,
            requests_max,
            inbound,
            replies,
        }
    }

    fn server_request(&mut self, msg: &Value) {
        if self.requests_seen >= self.requests_max {
            return;
        }
        self.requests_seen += 1;
        let reply = self.inbound.request(msg).or_else(|| jsonrpc::reply_to_server_request(msg).map(Reply::Now));
        if let Some(reply) = reply {
            let _ = self.replies.send(reply);
        }
    }
}

impl BodySink for Events {
    fn push(&mut self, chunk: &[u8]) -> Flow {
        for event in self.parser.feed(chunk) {
            self.events += 1;
            if event.truncated {
                // Over the bound: the answer if it starts with our id.
                if self.awaited.is_some() && jsonrpc::id_in_prefix(event.data.as_bytes()) == self.awaited {
                    let total = event.data.len() as u64;
                    self.answer = Some(Answer::Truncated { kept: event.data.into_bytes(), total });
                    return Flow::Done;
                }
                continue;
            }
            let Ok(msg) = serde_json::from_str::<Value>(&event.data) else { continue };
            match jsonrpc::kind(&msg) {
                Kind::Response(id) if Some(id) == self.awaited => {
                    self.answer = Some(Answer::Message(msg));
                    return Flow::Done;
                }
                Kind::ServerRequest => self.server_request(&msg),
                Kind::Notification => self.inbound.notification(&msg),
                _ => {}
            }
        }
        Flow::More
    }
}
