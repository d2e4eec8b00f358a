//! The session's standalone GET stream (Streamable HTTP, 2025-11-25 and
//! earlier): where a server sends what belongs to no request's stream —
//! a question it asks on its own initiative (`elicitation/create` sent
//! outside a request, as the TypeScript SDK's `server.request` does), its
//! pings, its notifications. It is opened once the session is initialized
//! and read by a task of its own for as long as the link lives; what
//! comes goes where a request's stream would send it (`Events`: questions
//! and progress to `Inbound`, replies posted at once).
//!
//! A server that offers no such stream (`405`, or any answer that is not an
//! event stream) is not asked again. One that closes it is asked again
//! after its `retry`, from its last event (`Last-Event-ID`); after
//! `EMPTY_OPENINGS_MAX` openings in a row that gave no event, it is let
//! be. Nothing a request waits for is read here (a server sends a
//! request's answer on that request's stream, or its resumption), so
//! losing this stream loses no answer.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::events::Events;
use super::streamable::{event_stream, retry_delay, HttpLink};
use crate::http::wire::{self, Track};

/// Openings in a row that gave no event before the stream is let be.
const EMPTY_OPENINGS_MAX: u32 = 5;
/// Bound on the server's requests answered on one opening of the stream.
const REQUESTS_PER_OPENING_MAX: usize = 256;

/// The task reading the stream; ended when the link goes (drop).
pub(crate) struct Listening(JoinHandle<()>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl HttpLink {
    /// Start reading this session's own stream, on a copy of the link the
    /// task owns (no session yet, or one already read: nothing to do).
    pub fn listen(&self) {
        let (Some(session), Some(protocol)) = (self.session_id(), self.protocol()) else { return };
        let mut listening = self.listening.lock().unwrap_or_else(|e| e.into_inner());
        if listening.is_none() {
            *listening = Some(Listening(tokio::spawn(listen(self.resume(&session, &protocol)))));
        }
    }

    /// Stop reading it (the link is closing, or dead).
    pub fn stop_listening(&self) {
        self.listening.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

async fn listen(link: HttpLink) {
    let mut last: Option<String> = None;
    let mut retry_ms: Option<u64> = None;
    let mut empty = 0;
    while empty < EMPTY_OPENINGS_MAX && link.alive() {
        match opening(&link, last.as_deref()).await {
            Opened::Refused => return,
            Opened::Failed => empty += 1,
            Opened::Read { events, last_id, retry } => {
                empty = if events == 0 { empty + 1 } else { 0 };
                last = last_id.or(last);
                retry_ms = retry.or(retry_ms);
            }
        }
        tokio::time::sleep(retry_delay(retry_ms)).await;
    }
}

/// How one opening of the stream went.
enum Opened {
    /// The server offers no stream (a status, or not an event stream).
    Refused,
    /// It could not be reached, or broke before its head.
    Failed,
    /// Read until the server closed it (or it broke).
    Read { events: u64, last_id: Option<String>, retry: Option<u64> },
}

async fn opening(link: &HttpLink, last: Option<&str>) -> Opened {
    let token = link.token().await.ok().flatten();
    let bytes = link.encode_get(last, token.as_deref());
    let mut track = Track::default();
    let Ok(mut conn) = wire::send(&link.target, &link.tls, &bytes, &mut track).await else { return Opened::Failed };
    let Ok(head) = conn.head(&mut track).await else { return Opened::Failed };
    if head.status != 200 || !event_stream(&head) {
        return Opened::Refused;
    }
    let (replies, mut to_send) = tokio::sync::mpsc::unbounded_channel();
    let bounds = (link.answer_bytes_max, REQUESTS_PER_OPENING_MAX);
    let mut events = Events::new(None, bounds, Arc::clone(&link.inbound), replies);
    // However it ended (closed or broken), what it carried was handled.
    let _ = link.read_events(&mut conn, &head, &mut events, &mut to_send).await;
    Opened::Read {
        events: events.events,
        last_id: events.parser.last_event_id().map(str::to_string),
        retry: events.parser.retry_ms(),
    }
}
