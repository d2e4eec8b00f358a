//! An OTLP/HTTP receiver on loopback, as a collector would be: it decodes
//! each `POST /v1/traces` (protobuf, with the opentelemetry-proto types)
//! and keeps the spans; or, told to, reads a request and never answers (a
//! receiver that hangs). Its thread ends with the test process.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;

/// One span as the receiver got it: ids in lower-case hex, attributes as
/// text.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent: String,
    pub kind: i32,
    pub attributes: BTreeMap<String, String>,
    /// The span's status code (0 unset, 1 ok, 2 error).
    pub status: i32,
}

impl Span {
    pub fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

pub struct OtlpReceiver {
    pub port: u16,
    spans: Arc<Mutex<Vec<Span>>>,
    /// Each request's path, `service.name` and content type.
    requests: Arc<Mutex<Vec<(String, String, String)>>>,
}

impl OtlpReceiver {
    /// A receiver that answers 200 to every export.
    pub fn start() -> OtlpReceiver {
        Self::serve(true)
    }

    /// A receiver that reads each export and never answers.
    pub fn hanging() -> OtlpReceiver {
        Self::serve(false)
    }

    fn serve(answers: bool) -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (kept, seen) = (spans.clone(), requests.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut r = BufReader::new(s.try_clone().unwrap());
                let (mut path, mut len, mut content_type) = (String::new(), 0usize, String::new());
                let mut first = true;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if first {
                        path = line.split(' ').nth(1).unwrap_or("").to_string();
                        first = false;
                    } else if let Some((k, v)) = line.trim_end().split_once(':') {
                        match k.to_ascii_lowercase().as_str() {
                            "content-length" => len = v.trim().parse().unwrap_or(0),
                            "content-type" => content_type = v.trim().to_string(),
                            _ => {}
                        }
                    }
                }
                let mut body = vec![0u8; len];
                if r.read_exact(&mut body).is_err() {
                    continue;
                }
                let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace export");
                let mut service = String::new();
                for rs in request.resource_spans {
                    if let Some(res) = &rs.resource {
                        for kv in &res.attributes {
                            if kv.key == "service.name" {
                                service = text(kv.value.as_ref().and_then(|v| v.value.as_ref()));
                            }
                        }
                    }
                    for ss in rs.scope_spans {
                        for sp in ss.spans {
                            let attributes = sp
                                .attributes
                                .iter()
                                .map(|kv| (kv.key.clone(), text(kv.value.as_ref().and_then(|v| v.value.as_ref()))))
                                .collect();
                            kept.lock().unwrap().push(Span {
                                name: sp.name,
                                trace_id: hex(&sp.trace_id),
                                span_id: hex(&sp.span_id),
                                parent: hex(&sp.parent_span_id),
                                kind: sp.kind,
                                attributes,
                                status: sp.status.map_or(0, |s| s.code),
                            });
                        }
                    }
                }
                seen.lock().unwrap().push((path, service, content_type));
                if answers {
                    let _ = s.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                } else {
                    held.push(s);
                }
            }
        });
        OtlpReceiver { port, spans, requests }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    pub fn requests(&self) -> Vec<(String, String, String)> {
        self.requests.lock().unwrap().clone()
    }
}

/// A loopback port nothing listens on (bound, then closed).
pub fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
