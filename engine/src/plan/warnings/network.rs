//! `NETWORK_UNDECLARED`: a task whose processes get no network (its
//! provider's and its own `network` declare nothing) while its command,
//! its inputs or its provider's command name a URL or a `HOST:PORT`: the
//! connection would be refused in the sandbox, and nothing else says why.
//! Pure and static: what the plan's words name, nothing looked up.

use super::{Warning, WarningCode};
use crate::plan::model::{PlanFile, ProviderSpec, Task};
use crate::plan::reach::Reach;

/// One warning per task, at its first word that names a host.
pub fn warnings(plan: &PlanFile) -> Vec<Warning> {
    let mut out = Vec::new();
    for (i, task) in plan.tasks.iter().enumerate() {
        let Some(spec) = plan.providers.get(&task.provider) else { continue };
        let provider_command = match spec {
            ProviderSpec::Command { .. } => None,
            ProviderSpec::Mcp { command: Some(c), .. } => Some(c),
            _ => continue,
        };
        if !Reach::of_task(task, spec).connect.is_empty() || spec.unconfined() {
            continue;
        }
        let words = task_words(task).chain(provider_command.into_iter().flatten().map(String::as_str));
        let Some((word, host)) = words.filter_map(|w| mentioned_host(w).map(|h| (w, h))).next() else { continue };
        out.push(Warning {
            code: WarningCode::NetworkUndeclared,
            path: format!("$.tasks[{i}].network"),
            message: format!(
                "task `{}` names `{word}`, but its processes get no network (none declared for it or provider `{}`): \
                 a connection there is refused; if it connects, add `\"network\": {{\"connect\": [\"{host}\"]}}` to the task or its provider",
                task.task_ref, task.provider
            ),
        });
    }
    out
}

/// The words of a task's command and its inputs.
fn task_words(task: &Task) -> impl Iterator<Item = &str> + '_ {
    let argv = task.action.get("run").and_then(|r| r.as_array()).into_iter().flatten().filter_map(|a| a.as_str());
    argv.chain(task.inputs.iter().map(String::as_str))
}

/// The `HOST:PORT` a word names: a URL's (`http://h/…` → `h:80`), or a
/// bare `HOST:PORT` (`127.0.0.1:8765`, `localhost:5432`,
/// `db.example.com:5432`), found in any part of the word (split at
/// spaces, quotes and `=`).
pub fn mentioned_host(word: &str) -> Option<String> {
    let parts = word.split(|c: char| c.is_whitespace() || "'\"=,;()<>".contains(c));
    parts.filter(|p| !p.is_empty()).find_map(host_of)
}

fn host_of(part: &str) -> Option<String> {
    if let Some((scheme, rest)) = part.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next()?.rsplit('@').next()?;
        if authority.is_empty() {
            return None;
        }
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" | "ws" => "80",
            "https" | "wss" => "443",
            "postgres" | "postgresql" => "5432",
            _ => "PORT",
        };
        return Some(match has_port(authority) {
            true => authority.to_string(),
            false => format!("{authority}:{default_port}"),
        });
    }
    let (host, port) = part.rsplit_once(':')?;
    let port_ok = !port.is_empty() && port.len() <= 5 && port.chars().all(|c| c.is_ascii_digit());
    (port_ok && is_host(host)).then(|| part.to_string())
}

/// File name endings a `NAME.EXT:LINE` (a traceback's place) ends with:
/// never taken for a host.
const FILE_ENDINGS: &[&str] = &[
    "py", "rs", "js", "ts", "sh", "go", "c", "h", "cc", "cpp", "rb", "java", "json", "txt", "csv", "md", "toml",
    "yaml", "yml", "html", "log", "sql", "lock", "cfg", "ini", "xml", "kt", "swift", "php", "pl",
];

/// `localhost`, an IPv4 address, or a dotted name whose last label is
/// not a file ending.
fn is_host(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    let ipv4 = labels.len() == 4
        && labels.iter().all(|l| !l.is_empty() && l.len() <= 3 && l.chars().all(|c| c.is_ascii_digit()));
    let named = labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels.last().is_some_and(|l| l.chars().all(|c| c.is_ascii_alphabetic()) && !FILE_ENDINGS.contains(l));
    host == "localhost" || ipv4 || named
}

/// `host:8080` or `[::1]:8080`, not `[::1]` or `host`.
fn has_port(authority: &str) -> bool {
    match authority.rsplit_once(':') {
        Some((host, port)) => !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) && !host.ends_with(':'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_found_in_urls_and_host_port_words() {
        assert_eq!(mentioned_host("http://127.0.0.1:8765/x").as_deref(), Some("127.0.0.1:8765"));
        assert_eq!(mentioned_host("https://api.example.com/v1").as_deref(), Some("api.example.com:443"));
        assert_eq!(mentioned_host("curl -s http://localhost/x").as_deref(), Some("localhost:80"));
        assert_eq!(mentioned_host("--db=db.internal:5432").as_deref(), Some("db.internal:5432"));
        assert_eq!(mentioned_host("localhost:3000").as_deref(), Some("localhost:3000"));
        for plain in ["build_prices.py", "a:b", "12:30", "prices.csv", "-m", "x.py:12", "file:///tmp/x"] {
            assert_eq!(mentioned_host(plain), None, "{plain}");
        }
    }
}
