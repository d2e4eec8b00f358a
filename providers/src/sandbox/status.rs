//! What the kernel offers, and how confined a provider process is: the
//! status the engine records on every attempt. The words are stable (they go
//! into the ledger and `--json` output).

use std::fmt;
use std::io;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// How a provider process is confined.
///
/// Serialized with a `state` tag: `{"state": "enforced", "abi": 7}`,
/// `{"state": "partial", "abi": 2, "missing": ["truncate", "ioctl_dev"]}`,
/// `{"state": "unavailable", "reason": "not_enabled"}`, `{"state": "disabled"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Landlock enforces every access right the policy asks for.
    Enforced { abi: u32 },
    /// Landlock is on, but this kernel cannot handle some rights the policy
    /// asks for (see [`Right`] for what each missing one leaves open).
    Partial { abi: u32, missing: Vec<Right> },
    /// The kernel has no usable Landlock: the process ran unconfined.
    Unavailable { reason: Unavailable },
    /// The plan opted this provider out (`"sandbox": "none"`): unconfined.
    Disabled,
}

impl Status {
    /// The one stable word: `enforced`, `partial`, `unavailable`, `disabled`.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Enforced { .. } => "enforced",
            Status::Partial { .. } => "partial",
            Status::Unavailable { .. } => "unavailable",
            Status::Disabled => "disabled",
        }
    }

    /// Whether any Landlock rule binds the process at all.
    pub fn is_confined(&self) -> bool {
        matches!(self, Status::Enforced { .. } | Status::Partial { .. })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Enforced { abi } => write!(f, "enforced (Landlock ABI {abi})"),
            Status::Partial { abi, missing } => {
                let names: Vec<&str> = missing.iter().map(|r| r.word()).collect();
                write!(f, "partially enforced (Landlock ABI {abi}; this kernel cannot restrict: {})", names.join(", "))
            }
            Status::Unavailable { reason } => write!(f, "unavailable ({reason})"),
            Status::Disabled => write!(f, "disabled by the plan"),
        }
    }
}

/// An access right the policy asks for that an older Landlock ABI lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Right {
    /// ABI 2. Without it the kernel refuses *every* link or rename across
    /// folders (stricter, not looser: `mv a/x b/` in the workspace fails).
    Refer,
    /// ABI 3. Without it `truncate(2)` is not restricted: a process could
    /// empty a file it may only read, the store included.
    Truncate,
    /// ABI 5. Without it `ioctl(2)` on devices opened in the sandbox is not
    /// restricted.
    IoctlDev,
}

impl Right {
    pub fn word(self) -> &'static str {
        match self {
            Right::Refer => "refer",
            Right::Truncate => "truncate",
            Right::IoctlDev => "ioctl_dev",
        }
    }

    /// The first Landlock ABI that handles this right.
    fn since_abi(self) -> u32 {
        match self {
            Right::Refer => 2,
            Right::Truncate => 3,
            Right::IoctlDev => 5,
        }
    }
}

/// Every right the policy asks for that did not exist in ABI 1.
const LATER_RIGHTS: [Right; 3] = [Right::Refer, Right::Truncate, Right::IoctlDev];

/// Why the kernel offers no Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// The kernel is built without Landlock (`ENOSYS`; Linux before 5.13 or
    /// `CONFIG_SECURITY_LANDLOCK=n`).
    NotBuilt,
    /// Built in but not enabled at boot (`EOPNOTSUPP`): `landlock` is missing
    /// from the `lsm=` boot parameter.
    NotEnabled,
    /// Something refused the probe itself (any other error, e.g. a seccomp
    /// filter of a container runtime).
    Blocked,
    /// Not the kernel's answer: the engine's testing aid
    /// (`ENGINE_SANDBOX=unavailable`) runs as if there were no Landlock.
    Simulated,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unavailable::NotBuilt => "the kernel is built without Landlock",
            Unavailable::NotEnabled => "Landlock is built in but not enabled at boot (lsm= boot parameter)",
            Unavailable::Blocked => "the kernel refused the Landlock probe (a seccomp filter?)",
            Unavailable::Simulated => {
                // What the kernel really offers, so the words claim nothing
                // about it that is not so.
                return match kernel() {
                    Kernel::Landlock { abi } => write!(
                        f,
                        "simulated by ENGINE_SANDBOX=unavailable, a testing aid: this kernel has Landlock ABI {abi}"
                    ),
                    Kernel::Unavailable(real) => write!(
                        f,
                        "simulated by ENGINE_SANDBOX=unavailable, a testing aid; this kernel has none either: {real}"
                    ),
                };
            }
        })
    }
}

/// What the running kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Landlock { abi: u32 },
    Unavailable(Unavailable),
}

impl Kernel {
    /// The status of a process confined on this kernel.
    pub fn confined_status(self) -> Status {
        match self {
            Kernel::Unavailable(reason) => Status::Unavailable { reason },
            Kernel::Landlock { abi } => {
                let missing: Vec<Right> = LATER_RIGHTS.into_iter().filter(|r| abi < r.since_abi()).collect();
                if missing.is_empty() {
                    Status::Enforced { abi }
                } else {
                    Status::Partial { abi, missing }
                }
            }
        }
    }

    /// Probe result → kernel: the ABI version, or the errno that says why not.
    fn from_probe(result: Result<u32, Option<i32>>) -> Kernel {
        match result {
            Ok(abi) if abi >= 1 => Kernel::Landlock { abi },
            Ok(_) => Kernel::Unavailable(Unavailable::Blocked),
            Err(Some(libc::ENOSYS)) => Kernel::Unavailable(Unavailable::NotBuilt),
            Err(Some(libc::EOPNOTSUPP)) => Kernel::Unavailable(Unavailable::NotEnabled),
            Err(_) => Kernel::Unavailable(Unavailable::Blocked),
        }
    }
}

/// The running kernel's Landlock support, probed once per process (one
/// syscall), then cached.
pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| Kernel::from_probe(probe_abi()))
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`
/// returns the highest ABI the kernel supports. (The `landlock` crate keeps
/// its own probe private.)
fn probe_abi() -> Result<u32, Option<i32>> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute, size 0 and the VERSION flag, the kernel
    // reads no memory; it only returns a number or an errno.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(io::Error::last_os_error().raw_os_error());
    }
    u32::try_from(v).map_err(|_| None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_abi_reports_what_it_cannot_restrict() {
        let status = |abi| Kernel::Landlock { abi }.confined_status();
        assert_eq!(
            status(1),
            Status::Partial { abi: 1, missing: vec![Right::Refer, Right::Truncate, Right::IoctlDev] }
        );
        assert_eq!(status(2), Status::Partial { abi: 2, missing: vec![Right::Truncate, Right::IoctlDev] });
        assert_eq!(status(4), Status::Partial { abi: 4, missing: vec![Right::IoctlDev] });
        assert_eq!(status(5), Status::Enforced { abi: 5 });
        assert_eq!(status(7), Status::Enforced { abi: 7 });
        assert_eq!(status(42), Status::Enforced { abi: 42 });
    }

    #[test]
    fn a_simulated_kernel_says_so_and_what_the_real_one_has() {
        let words = Unavailable::Simulated.to_string();
        assert!(words.starts_with("simulated by ENGINE_SANDBOX=unavailable"), "{words}");
        match kernel() {
            Kernel::Landlock { abi } => {
                assert!(words.ends_with(&format!("this kernel has Landlock ABI {abi}")), "{words}")
            }
            Kernel::Unavailable(real) => assert!(words.ends_with(&real.to_string()), "{words}"),
        }
        assert!(!words.contains("not enabled at boot") || kernel() == Kernel::Unavailable(Unavailable::NotEnabled));
    }

    #[test]
    fn probe_errors_name_the_reason() {
        assert_eq!(Kernel::from_probe(Ok(7)), Kernel::Landlock { abi: 7 });
        assert_eq!(Kernel::from_probe(Err(Some(libc::ENOSYS))), Kernel::Unavailable(Unavailable::NotBuilt));
        assert_eq!(Kernel::from_probe(Err(Some(libc::EOPNOTSUPP))), Kernel::Unavailable(Unavailable::NotEnabled));
        assert_eq!(Kernel::from_probe(Err(Some(libc::EPERM))), Kernel::Unavailable(Unavailable::Blocked));
        assert_eq!(Kernel::from_probe(Ok(0)), Kernel::Unavailable(Unavailable::Blocked));
    }

    #[test]
    fn the_recorded_words_are_stable() {
        let cases = [
            (Status::Enforced { abi: 7 }, json!({"state": "enforced", "abi": 7})),
            (
                Status::Partial { abi: 2, missing: vec![Right::Truncate, Right::IoctlDev] },
                json!({"state": "partial", "abi": 2, "missing": ["truncate", "ioctl_dev"]}),
            ),
            (
                Status::Unavailable { reason: Unavailable::NotEnabled },
                json!({"state": "unavailable", "reason": "not_enabled"}),
            ),
            (Status::Disabled, json!({"state": "disabled"})),
            (
                Status::Unavailable { reason: Unavailable::Simulated },
                json!({"state": "unavailable", "reason": "simulated"}),
            ),
        ];
        for (status, expected) in cases {
            let value = serde_json::to_value(&status).unwrap();
            assert_eq!(value, expected);
            assert_eq!(value["state"], status.word());
            assert_eq!(serde_json::from_value::<Status>(value).unwrap(), status);
        }
    }

    #[test]
    fn human_words_claim_no_more_than_the_state() {
        assert_eq!(Status::Disabled.to_string(), "disabled by the plan");
        assert_eq!(Status::Enforced { abi: 7 }.to_string(), "enforced (Landlock ABI 7)");
        let partial = Status::Partial { abi: 2, missing: vec![Right::Truncate] }.to_string();
        assert!(partial.starts_with("partially enforced") && partial.contains("truncate"), "{partial}");
        let unavailable = Status::Unavailable { reason: Unavailable::NotBuilt }.to_string();
        assert!(unavailable.starts_with("unavailable (") && unavailable.contains("without Landlock"));
        assert!(!Status::Disabled.is_confined() && !Status::Unavailable { reason: Unavailable::Blocked }.is_confined());
    }
}
