//! When a person's approval (or answer) ends: `--for DURATION` or the
//! plan's `approvals.expire_after`, as `90s`, `5m`, `2h` or `1d`. Past its
//! time an approval is `expired`: it pays for no call (`decide::gate`).

/// The longest an approval may be given for: 366 days.
pub const EXPIRE_AFTER_MS_MAX: u64 = 366 * 86_400_000;

/// `90s`, `5m`, `2h`, `1d` in milliseconds; at least one second.
pub fn parse(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: a number then s, m, h or d (`90s`, `5m`, `2h`, `1d`)"))?;
    let per = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("`{s}` is not a duration: a number then s, m, h or d (`90s`, `5m`, `2h`, `1d`)")),
    };
    let ms = n.checked_mul(per).filter(|ms| *ms <= EXPIRE_AFTER_MS_MAX);
    match ms {
        Some(0) => Err(format!("`{s}`: an approval lasts at least 1s")),
        Some(ms) => Ok(ms),
        None => Err(format!("`{s}` is longer than 366 days")),
    }
}

/// `expires in 4 min`, `expires in 30 s`, `expired`: what is left of an
/// approval at `now_ms`.
pub fn words(expires_at_ms: i64, now_ms: i64) -> String {
    let left = expires_at_ms - now_ms;
    match left {
        l if l <= 0 => "expired".to_string(),
        l if l < 60_000 => format!("expires in {} s", (l + 999) / 1000),
        l if l < 7_200_000 => format!("expires in {} min", (l + 59_999) / 60_000),
        l if l < 172_800_000 => format!("expires in {} h", (l + 3_599_999) / 3_600_000),
        l => format!("expires in {} days", (l + 86_399_999) / 86_400_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_their_unit_and_their_bounds() {
        assert_eq!(parse("90s"), Ok(90_000));
        assert_eq!(parse("5m"), Ok(300_000));
        assert_eq!(parse("2h"), Ok(7_200_000));
        assert_eq!(parse("1d"), Ok(86_400_000));
        for bad in ["", "5", "m", "5x", "-5m", "1.5h", "0s", "367d", "99999999999999999999d"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_is_left_is_said_in_the_unit_that_fits() {
        assert_eq!(words(1_000, 1_000), "expired");
        assert_eq!(words(1_000, 5_000), "expired");
        assert_eq!(words(30_000, 0), "expires in 30 s");
        assert_eq!(words(240_000, 0), "expires in 4 min");
        assert_eq!(words(10_800_000, 0), "expires in 3 h");
        assert_eq!(words(3 * 86_400_000, 0), "expires in 3 days");
    }
}
