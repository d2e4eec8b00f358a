//! The OpenTelemetry SDK, set up for one engine process: the OTLP/HTTP
//! (protobuf) exporter on the blocking client (`client`), behind the SDK's
//! batch processor (its own thread: a run never waits on the receiver),
//! watched so that what was not exported is said, never hidden.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, RetryPolicy, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter as Export,
};
use opentelemetry_sdk::Resource;

use super::client::Blocking;

/// One export's bound: connect, send, answer.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);
/// What the end of the command waits, at most, for the last export.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the batch thread sends what the run has ended so far.
const SCHEDULED_DELAY: Duration = Duration::from_secs(1);
/// Spans kept waiting for the receiver; more are dropped, and counted as
/// not exported.
const QUEUE_SPANS_MAX: usize = 16_384;

/// What the exports did: spans the receiver took, and the first error.
#[derive(Debug, Default)]
pub struct Tally {
    pub exported: AtomicUsize,
    pub first_error: Mutex<Option<String>>,
}

impl Tally {
    /// Keep the first failure's words.
    pub fn failed(&self, why: String) {
        self.first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(why);
    }
}

/// The OTLP exporter, counting.
#[derive(Debug)]
struct Watched {
    inner: opentelemetry_otlp::SpanExporter,
    tally: Arc<Tally>,
}

impl Export for Watched {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.tally.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => self.tally.failed(e.to_string()),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The SDK's provider sending to `url` (trusting `ca_file`'s certificates
/// too), and its tally. Nothing is sent
/// until a span ends.
pub fn provider(url: &str, ca_file: Option<PathBuf>) -> Result<(SdkTracerProvider, Arc<Tally>), String> {
    let tally = Arc::new(Tally::default());
    let client = Blocking { timeout: EXPORT_TIMEOUT, ca_file, failures: tally.clone() };
    let inner = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        // One try per batch: a retry's wait would only move the warning.
        .with_retry_policy(RetryPolicy::disabled())
        .build()
        .map_err(|e| e.to_string())?;
    let config = BatchConfigBuilder::default()
        .with_scheduled_delay(SCHEDULED_DELAY)
        .with_max_queue_size(QUEUE_SPANS_MAX)
        .build();
    let batch = BatchSpanProcessor::builder(Watched { inner, tally: tally.clone() }).with_batch_config(config).build();
    // The resource names the engine only: no host, no process, no
    // variable's value (the default detectors would read them).
    let resource = Resource::builder_empty()
        .with_service_name("engine")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder().with_span_processor(batch).with_resource(resource).build();
    Ok((provider, tally))
}
