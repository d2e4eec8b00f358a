//! One run's spans: the run, a span per task it works on, per attempt, per
//! provider call, each a child of the one before. The driver says what
//! happened (a gate written, a call handed over, an answer, a verdict);
//! this keeps the open spans and ends them. It records identities and
//! states only: never a request, an answer, a secret or a variable.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use super::parent::TraceParent;
use crate::ids::AttemptId;

/// What a run needs of the process's export: its tracer, the caller's
/// context, and the count of spans ended (to say how many were lost).
pub struct Tracing {
    pub(super) tracer: SdkTracer,
    pub(super) caller: Option<TraceParent>,
    pub(super) ended: Arc<AtomicUsize>,
}

/// The spans of one run, open until their end is known.
pub struct RunTrace {
    tracer: SdkTracer,
    ended: Arc<AtomicUsize>,
    run: Context,
    tasks: HashMap<String, Context>,
    attempts: HashMap<AttemptId, Context>,
    calls: HashMap<AttemptId, Context>,
}

/// What a task's attempt is, for its span.
pub struct Attempt<'a> {
    pub task_ref: &'a str,
    pub operation_id: &'a str,
    pub try_no: i64,
    pub kind: &'a str,
}

impl RunTrace {
    /// The run's span: a child of the caller's `TRACEPARENT` when one was
    /// given (same trace id), else the root of a trace of its own.
    pub fn start(tracing: Tracing, goal_id: &str, revision: i64) -> RunTrace {
        let parent = match tracing.caller {
            Some(p) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(p.trace_id),
                SpanId::from_bytes(p.span_id),
                TraceFlags::new(p.flags),
                true,
                TraceState::default(),
            )),
            None => Context::new(),
        };
        let attributes =
            vec![KeyValue::new("engine.goal.id", goal_id.to_string()), KeyValue::new("engine.revision", revision)];
        let run = child(&tracing.tracer, &parent, "engine.run", attributes);
        RunTrace {
            tracer: tracing.tracer,
            ended: tracing.ended,
            run,
            tasks: HashMap::new(),
            attempts: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    /// A task the run is about to gate (its span opens once per run).
    pub fn task(&mut self, task_ref: &str, provider: &str, provider_kind: &str) {
        if self.tasks.contains_key(task_ref) {
            return;
        }
        let attributes = vec![
            KeyValue::new("engine.task.ref", task_ref.to_string()),
            KeyValue::new("engine.provider.name", provider.to_string()),
            KeyValue::new("engine.provider.kind", provider_kind.to_string()),
        ];
        let cx = child(&self.tracer, &self.run, "engine.task", attributes);
        self.tasks.insert(task_ref.to_string(), cx);
    }

    /// The call-site gate stopped the task before an attempt (an approval
    /// wanted, a budget spent): said on the task's span.
    pub fn gate_stopped(&mut self, task_ref: &str, why: &str) {
        if let Some(cx) = self.tasks.get(task_ref) {
            cx.span().set_attribute(KeyValue::new("engine.gate", why.to_string()));
        }
    }

    /// An attempt whose intent is committed.
    pub fn attempt(&mut self, id: AttemptId, a: Attempt<'_>) {
        let Some(task) = self.tasks.get(a.task_ref) else { return };
        let attributes = vec![
            KeyValue::new("engine.task.ref", a.task_ref.to_string()),
            KeyValue::new("engine.operation.id", a.operation_id.to_string()),
            KeyValue::new("engine.attempt.try", a.try_no),
            KeyValue::new("engine.attempt.kind", a.kind.to_string()),
        ];
        let cx = child(&self.tracer, task, "engine.attempt", attributes);
        self.attempts.insert(id, cx);
    }

    /// The call of attempt `id` is handed to its provider: its span opens,
    /// and its W3C `traceparent` is what the provider is sent.
    pub fn call(&mut self, id: AttemptId, operation_id: &str, try_no: i64) -> Option<String> {
        let attempt = self.attempts.get(&id)?;
        let attributes = vec![
            KeyValue::new("engine.operation.id", operation_id.to_string()),
            KeyValue::new("engine.attempt.try", try_no),
        ];
        let cx = child_of_kind(&self.tracer, attempt, "engine.provider_call", SpanKind::Client, attributes);
        let sc = cx.span().span_context().clone();
        self.calls.insert(id, cx);
        let parent = TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        };
        Some(parent.header())
    }

    /// The call's outcome as the provider reported it: `received`,
    /// `not_dispatched` or `lost`, and the kind of the latter two.
    pub fn call_ended(&mut self, id: AttemptId, outcome: &str, why: Option<&str>) {
        let Some(cx) = self.calls.remove(&id) else { return };
        cx.span().set_attribute(KeyValue::new("engine.call.outcome", outcome.to_string()));
        if let Some(why) = why {
            cx.span().set_attribute(KeyValue::new("engine.call.reason", why.to_string()));
        }
        if outcome != "received" {
            cx.span().set_status(Status::error(outcome.to_string()));
        }
        self.end(&cx);
    }

    pub fn attempt_open(&self, id: AttemptId) -> bool {
        self.attempts.contains_key(&id)
    }

    pub fn open_attempts(&self) -> Vec<AttemptId> {
        self.attempts.keys().copied().collect()
    }

    /// The attempt came to rest: its state, and its classification when
    /// it failed or its effect is unknown.
    pub fn attempt_ended(&mut self, id: AttemptId, state: &str, class: Option<(&str, &str)>) {
        if let Some(cx) = self.calls.remove(&id) {
            self.end(&cx);
        }
        let Some(cx) = self.attempts.remove(&id) else { return };
        cx.span().set_attribute(KeyValue::new("engine.attempt.state", state.to_string()));
        if let Some((class, rule)) = class {
            cx.span().set_attribute(KeyValue::new("engine.attempt.class", class.to_string()));
            cx.span().set_attribute(KeyValue::new("engine.attempt.rule", rule.to_string()));
        }
        if matches!(state, "failed" | "effect_unknown") {
            cx.span().set_status(Status::error(class.map_or(state, |(c, _)| c).to_string()));
        }
        self.end(&cx);
    }

    pub fn open_tasks(&self) -> Vec<String> {
        self.tasks.keys().cloned().collect()
    }

    /// The task came to rest in this run.
    pub fn task_ended(&mut self, task_ref: &str, state: &str) {
        let Some(cx) = self.tasks.remove(task_ref) else { return };
        cx.span().set_attribute(KeyValue::new("engine.task.state", state.to_string()));
        if matches!(state, "failed" | "effect_unknown") {
            cx.span().set_status(Status::error(state.to_string()));
        }
        self.end(&cx);
    }

    /// The run's end: the goal's state and the command's exit code. Spans
    /// still open (a task whose end no one said) end with it.
    pub fn finish(mut self, goal_state: &str, exit_code: i32) {
        for (_, cx) in self.calls.drain().chain(self.attempts.drain()).collect::<Vec<_>>() {
            self.end(&cx);
        }
        for (_, cx) in self.tasks.drain().collect::<Vec<_>>() {
            self.end(&cx);
        }
        let run = self.run.clone();
        run.span().set_attribute(KeyValue::new("engine.goal.state", goal_state.to_string()));
        run.span().set_attribute(KeyValue::new("engine.exit_code", i64::from(exit_code)));
        if exit_code != 0 {
            run.span().set_status(Status::error(goal_state.to_string()));
        }
        self.end(&run);
    }

    /// End a span, counting it when it is to be exported (sampled).
    fn end(&self, cx: &Context) {
        if cx.span().is_recording() {
            self.ended.fetch_add(1, Ordering::Relaxed);
        }
        cx.span().end();
    }
}

fn child(tracer: &SdkTracer, parent: &Context, name: &'static str, attributes: Vec<KeyValue>) -> Context {
    child_of_kind(tracer, parent, name, SpanKind::Internal, attributes)
}

fn child_of_kind(
    tracer: &SdkTracer,
    parent: &Context,
    name: &'static str,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> Context {
    let span = tracer.span_builder(name).with_kind(kind).with_attributes(attributes).start_with_context(tracer, parent);
    parent.with_span(span)
}
