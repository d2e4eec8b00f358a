//! What an attempt records of its sandbox: the files' status (the words of
//! [`Status`], at the top level as they always were), and beside it the
//! network's, the stores', and the names of the environment variables its
//! processes got (never a value). An attempt recorded before these existed
//! reads with `None` for each: not recorded, never assumed.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{NetStatus, NsStatus, Privileges, Status};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub files: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stores: Option<NsStatus>,
    /// The names of the variables the processes got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// What they kept of the engine's privileges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileges: Option<Privileges>,
    /// How a task's declared outputs held its writes in the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<Writes>,
}

/// How a task's declared `outputs` (and `may_change`) hold its process's
/// writes in the workspace: by the kernel (Landlock rules on exactly the
/// paths below, the rest of the workspace read-only) or only by the check
/// after the attempt (the workspace writable, every change judged then).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writes {
    pub by: WritesBy,
    /// The workspace paths (relative) the kernel let it write, each with
    /// the outputs line it serves (`by: kernel` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<WriteRule>,
    /// The declared lines the kernel did not hold it to, each with why:
    /// checked after the attempt only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_attempt: Vec<AfterOnly>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritesBy {
    /// The workspace is read-only but for `rules`.
    Kernel,
    /// The whole workspace was writable; only the check after the attempt
    /// held the task to its outputs.
    AfterAttempt,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteRule {
    pub output: String,
    /// Relative to the workspace; a folder with everything beneath it, or
    /// a file (written in place).
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfterOnly {
    pub output: String,
    pub why: String,
}

impl fmt::Display for Writes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self.rules.iter().map(|r| format!("{} (for {:?})", r.path, r.output)).collect();
        match self.by {
            WritesBy::Kernel if rules.is_empty() => f.write_str("workspace writes: none, by the kernel")?,
            WritesBy::Kernel => write!(f, "workspace writes: only {}, by the kernel", rules.join(", "))?,
            WritesBy::AfterAttempt => {
                f.write_str("workspace writes: the whole workspace, checked after the attempt")?
            }
        }
        for a in &self.after_attempt {
            write!(f, "; {:?} checked after the attempt only: {}", a.output, a.why)?;
        }
        Ok(())
    }
}

impl Record {
    /// An older attempt's files' status alone.
    pub fn files_only(files: Status) -> Record {
        Record { files, network: None, stores: None, env: None, privileges: None, writes: None }
    }
}

impl fmt::Display for Record {
    /// `files …; network …; stores …; env …`, each part as recorded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.files)?;
        if let Some(n) = &self.network {
            write!(f, "; network: {n}")?;
        }
        if let Some(s) = &self.stores {
            write!(f, "; stores: {s}")?;
        }
        if let Some(env) = &self.env {
            write!(f, "; environment: {}", env.join(" "))?;
        }
        if let Some(p) = &self.privileges {
            write!(f, "; privileges: {p}")?;
        }
        if let Some(w) = &self.writes {
            write!(f, "; {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::NetBy;
    use serde_json::json;

    #[test]
    fn the_files_status_stays_at_the_top_and_older_records_still_read() {
        let r = Record {
            files: Status::Enforced { abi: 7 },
            network: Some(NetStatus::Enforced { by: NetBy::Namespace }),
            stores: Some(NsStatus::Hidden),
            env: Some(vec!["PATH".into(), "API_KEY".into()]),
            privileges: Some(Privileges::Dropped),
            writes: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"state": "enforced", "abi": 7, "network": {"state": "enforced", "by": "namespace"},
                   "stores": {"state": "hidden"}, "env": ["PATH", "API_KEY"], "privileges": {"state": "dropped"}})
        );
        assert_eq!(serde_json::from_value::<Record>(v).unwrap(), r);
        let old: Record =
            serde_json::from_value(json!({"state": "partial", "abi": 2, "missing": ["truncate"]})).unwrap();
        assert_eq!(
            old,
            Record::files_only(
                serde_json::from_value(json!({"state": "partial", "abi": 2, "missing": ["truncate"]})).unwrap()
            )
        );
        let text = r.to_string();
        assert!(
            text.starts_with("enforced (Landlock ABI 7); network: none")
                && text.ends_with(
                    "environment: PATH API_KEY; privileges: none (no capability, no new privileges, seccomp filter)"
                ),
            "{text}"
        );
    }
}
