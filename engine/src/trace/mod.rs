//! OpenTelemetry traces of a run (docs/observation.md, "Traces"): where
//! they go (`endpoint`), the caller's context and the one sent to providers
//! (`parent`), the SDK's set-up (`export`) and its HTTP client (`client`),
//! and one run's spans (`spans`), fed by the run's driver.
//!
//! The export is the process's: `start` sets it up when the command line
//! or the environment asks for it (else nothing is built and nothing is
//! sent), each run takes its spans from it (`for_run`), and `finish` sends
//! what is left within a bound and says, on one line, what did not reach
//! the receiver. A trace never changes what a run does nor its exit code.

mod client;
mod endpoint;
mod export;
mod parent;
mod spans;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry::trace::TracerProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::error::{Error, Result};
pub use endpoint::{resolve, Endpoint, Refused, BASE_VARIABLE, TRACES_VARIABLE};
pub use parent::{parse as parse_traceparent, TraceParent};
pub use spans::{Attempt, RunTrace, Tracing};

/// A caller's trace context (W3C), read from the environment.
pub const CALLER_VARIABLE: &str = "TRACEPARENT";
/// The OTLP specification's certificate for an `https://` receiver: the
/// signal's own, else the general one.
pub const CERTIFICATE_VARIABLES: [&str; 2] =
    ["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"];

struct Installed {
    endpoint: Endpoint,
    provider: SdkTracerProvider,
    tally: Arc<export::Tally>,
    ended: Arc<AtomicUsize>,
    caller: Option<TraceParent>,
}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);

/// Set up this process's export when `--otlp` (`flag`) or the
/// OpenTelemetry variables ask for one; a URL that is not one is refused
/// at its place. A caller's `TRACEPARENT` that is not valid W3C is ignored
/// with one warning.
pub fn start(flag: Option<&str>) -> Result<()> {
    // The flag wins: the variables are not even read then.
    let (traces, base) = match flag {
        Some(_) => (None, None),
        None => (variable(TRACES_VARIABLE)?, variable(BASE_VARIABLE)?),
    };
    let endpoint = resolve(flag, traces.as_deref(), base.as_deref())
        .map_err(|r| Error::usage(format!("{}: {}", r.place, r.why)).at(r.place))?;
    let Some(endpoint) = endpoint else { return Ok(()) };
    let caller = match std::env::var(CALLER_VARIABLE) {
        Err(std::env::VarError::NotPresent) => None,
        found => match found.map_err(|_| "it is not UTF-8".to_string()).and_then(|v| parent::parse(&v)) {
            Ok(p) => Some(p),
            Err(why) => {
                crate::say_line!(
                    "engine: warning: {CALLER_VARIABLE} is not a valid W3C traceparent ({why}): ignored, the run's trace starts on its own"
                );
                None
            }
        },
    };
    let ca_file = certificate()?;
    let (provider, tally) = export::provider(&endpoint.url, ca_file)
        .map_err(|e| Error::usage(format!("{}: {e}", endpoint.from)).at(endpoint.from))?;
    let installed = Installed { endpoint, provider, tally, ended: Arc::new(AtomicUsize::new(0)), caller };
    *INSTALLED.lock().unwrap_or_else(|p| p.into_inner()) = Some(installed);
    Ok(())
}

/// A variable's value; one that is not UTF-8 is no URL, refused at its name.
fn variable(name: &'static str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::usage(format!("{name}: not UTF-8")).at(name)),
    }
}

/// The certificate file an `https://` receiver is verified with besides
/// the system's roots, read now: one that cannot be read is refused at its
/// variable's name.
fn certificate() -> Result<Option<std::path::PathBuf>> {
    let Some((name, path)) = CERTIFICATE_VARIABLES.iter().find_map(|name| {
        std::env::var_os(name).filter(|v| !v.is_empty()).map(|v| (*name, std::path::PathBuf::from(v)))
    }) else {
        return Ok(None);
    };
    providers::tls::read_ca_file(&path).map_err(|e| Error::usage(format!("{name}: {e}")).at(name))?;
    Ok(Some(path))
}

/// What a run needs to trace itself, when this process exports a trace.
pub fn for_run() -> Option<Tracing> {
    let installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    let i = installed.as_ref()?;
    Some(Tracing { tracer: i.provider.tracer("engine"), caller: i.caller, ended: i.ended.clone() })
}

/// Send what is left (waiting `export::SHUTDOWN_TIMEOUT` at most) and say
/// on stderr, once, how many spans did not reach the receiver and why.
pub fn finish() {
    let Some(i) = INSTALLED.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
    let shut = i.provider.shutdown_with_timeout(export::SHUTDOWN_TIMEOUT);
    let ended = i.ended.load(Ordering::Relaxed);
    let exported = i.tally.exported.load(Ordering::Relaxed);
    if exported >= ended {
        return;
    }
    let error = i.tally.first_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let why = match (error, shut) {
        (Some(e), _) => e,
        (None, Err(_)) => format!("no answer within {} s", export::SHUTDOWN_TIMEOUT.as_secs()),
        (None, Ok(())) => "spans were dropped before export".to_string(),
    };
    crate::say_line!(
        "engine: warning: traces not exported: {} of {ended} spans did not reach {} ({why}); the run itself is unaffected",
        ended - exported,
        i.endpoint.url
    );
}
