//! A person's command done once: `--request-id ID` on `approve`, `settle`,
//! `retry`, `repair` and `revise`.
//!
//! A caller that lost a command's reply may give it again under the same
//! id. The engine keeps the id with the fingerprint of its command (the
//! command, its arguments, the user) in the transaction of the act it
//! records, and the command's answer once it finished. The same id and
//! fingerprint again: the first answer, the same exit code, nothing new
//! done, and the output says it is a repeat. The same id with another
//! command: `REQUEST_ID_CONFLICT`, naming the first. A command refused
//! before its act (bad input, `NOT_PERMITTED`) records no id: giving it
//! again is trying again.

use serde_json::{json, Value};

use crate::clock::utc;
use crate::decide::request_id::{self, Judgement};
use crate::error::{Code, Error, Result};
use crate::report::Output;
use crate::store::acts::{FirstResult, NewRequestId, Person, RequestIdRecord};
use crate::store::lease::Holder;
use crate::store::{Durability, LeaseGuard, LedgerRead, Store};

/// A request id as given, with the command it names.
pub struct Given {
    id: String,
    fingerprint: String,
    command: Value,
}

impl Given {
    /// `None` without a request id; a malformed one is a usage error.
    pub fn new(id: Option<String>, name: &str, args: Value, person: &Person) -> Result<Option<Given>> {
        let Some(id) = id else { return Ok(None) };
        request_id::well_formed(&id).map_err(|why| Error::usage(format!("--request-id: {why}")).at(id.clone()))?;
        let command = request_id::command(name, args, &person.user);
        let fingerprint = request_id::fingerprint(&command);
        Ok(Some(Given { id, fingerprint, command }))
    }

    fn new_id(&self) -> NewRequestId<'_> {
        NewRequestId { request_id: &self.id, fingerprint: &self.fingerprint, command: &self.command }
    }
}

/// A request id given before, answered without looking at the command
/// again: its first answer (a repeat) or `REQUEST_ID_CONFLICT`. Asked
/// before the command's own checks (who may, what state), which the first
/// command changed; `run` asks again under the lease.
pub fn answered(read: &dyn LedgerRead, given: Option<&Given>) -> Result<Option<Output>> {
    let Some(given) = given else { return Ok(None) };
    let Some(r) = read.request_id(&given.id)? else { return Ok(None) };
    match request_id::judge(Some(&r.fingerprint), &given.fingerprint) {
        Judgement::Repeat => Ok(Some(repeat(&r))),
        Judgement::Conflict => Err(conflict(&r)),
        Judgement::New => Ok(None),
    }
}

/// Run `act` once under `given` (or plainly without it), holding the lease:
/// a repeat gives the first answer back, a conflict is refused, and a new
/// id is recorded by `act` with its act and then given the answer.
pub fn run(
    ledger: &mut LeaseGuard,
    given: Option<&Given>,
    act: impl FnOnce(&mut LeaseGuard, Option<&NewRequestId>) -> Result<Output>,
) -> Result<Output> {
    let Some(given) = given else { return act(ledger, None) };
    if let Some(r) = ledger.read().request_id(&given.id)? {
        match request_id::judge(Some(&r.fingerprint), &given.fingerprint) {
            Judgement::Repeat => return Ok(repeat(&r)),
            Judgement::Conflict => return Err(conflict(&r)),
            Judgement::New => {}
        }
    }
    let answer = act(ledger, Some(&given.new_id()));
    let first = first_of(&answer);
    // Kept only where the act recorded the id (a command refused before
    // its act left none). Failing to keep it loses no act: a repeat then
    // says the first command did not finish.
    if let Err(e) = ledger.write(Durability::Full, |tx| tx.finish_request_id(&given.id, &first).map(|_| ())) {
        crate::say_line!("engine: the answer to request {} was not kept: {e}", given.id);
    }
    answer
}

/// `run` for an act written beside the live run that holds the store
/// (`Store::write_beside`, fenced by `holder`): an answer to a question
/// that run holds open.
pub fn beside(
    store: &Store,
    holder: &Holder,
    given: Option<&Given>,
    act: impl FnOnce(Option<&NewRequestId>) -> Result<Output>,
) -> Result<Output> {
    let Some(given) = given else { return act(None) };
    let answer = act(Some(&given.new_id()));
    let first = first_of(&answer);
    if let Err(e) = store.write_beside(holder, |tx| tx.finish_request_id(&given.id, &first).map(|_| ())) {
        crate::say_line!("engine: the answer to request {} was not kept: {e}", given.id);
    }
    answer
}

fn first_of(answer: &Result<Output>) -> FirstResult {
    match answer {
        Ok(out) => FirstResult { exit_code: out.exit_code, text: out.text.clone(), json: out.json.clone() },
        Err(e) => FirstResult {
            exit_code: e.code.exit_code(),
            text: format!("error: {e}\n"),
            json: json!({"ok": false, "error": e}),
        },
    }
}

/// The first answer, unchanged, marked as a repeat.
fn repeat(r: &RequestIdRecord) -> Output {
    let marker = json!({"request_id": r.request_id, "first_at": utc(r.at_ms), "command": r.command});
    let Some(first) = &r.result else {
        return Output {
            text: format!(
                "repeat of request {} (first given {}): its first command did not finish (the engine stopped before it kept its answer); nothing new was done. What it recorded is in the ledger: `engine status`.\n",
                r.request_id,
                utc(r.at_ms)
            ),
            json: json!({"ok": false, "repeat": marker, "first_finished": false}),
            exit_code: Code::UsageError.exit_code(),
        };
    };
    let json = match &first.json {
        Value::Object(m) => {
            let mut m = m.clone();
            m.insert("repeat".into(), marker);
            Value::Object(m)
        }
        other => json!({"first": other, "repeat": marker}),
    };
    let text = format!(
        "repeat of request {} (first given {}): nothing new was done; its first answer:\n{}",
        r.request_id,
        utc(r.at_ms),
        first.text
    );
    Output { text, json, exit_code: first.exit_code }
}

fn conflict(r: &RequestIdRecord) -> Error {
    Error::new(
        Code::RequestIdConflict,
        format!(
            "request id {} was first given {} for another command: {}; nothing was done",
            r.request_id,
            utc(r.at_ms),
            describe(&r.command)
        ),
    )
    .at(r.request_id.clone())
    .with_details(json!({"request_id": r.request_id, "first_command": r.command}))
}

/// `engine approve OP --note "…" (by alice)`, from a recorded command.
fn describe(command: &Value) -> String {
    let name = command["command"].as_str().unwrap_or("?");
    let args: Vec<String> = command["args"]
        .as_object()
        .map(|m| m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| format!("{k}={}", v)).collect())
        .unwrap_or_default();
    format!("`engine {name} {}` by {}", args.join(" "), command["user"].as_str().unwrap_or("?"))
}
