//! Calendar helpers shared by time notes, time conditions and the reconciler: weekdays,
//! `HH:MM` clock windows, day names, RFC 3339 text. All UTC.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::error::Error;

/// Weekday names, Monday first.
const DAY_NAMES: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// `at` as RFC 3339 in UTC to the second (`2026-01-01T00:00:00Z`), as Kubernetes writes times.
pub fn rfc3339(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// True for Monday to Friday (UTC) at `at`.
pub fn is_weekday(at: Timestamp) -> bool {
    at.to_zoned(TimeZone::UTC).weekday().to_monday_one_offset() <= 5
}

/// Minutes since midnight of an `HH:MM` text.
pub fn clock_minutes(text: &str) -> Result<u32, Error> {
    let (h, m) = text
        .trim()
        .split_once(':')
        .ok_or_else(|| Error::ClockTime(format!("not a time of day: {text:?} (want HH:MM)")))?;
    let (h, m): (u32, u32) = (
        h.parse()
            .map_err(|_| Error::ClockTime(format!("bad hour in {text:?}")))?,
        m.parse()
            .map_err(|_| Error::ClockTime(format!("bad minute in {text:?}")))?,
    );
    if h > 23 || m > 59 {
        return Err(Error::ClockTime(format!("not a time of day: {text:?}")));
    }
    Ok(h * 60 + m)
}

/// True when `at` (UTC) lies in [start, end), wrapping past midnight when end < start.
pub fn in_clock_window(at: Timestamp, start: u32, end: u32) -> bool {
    let zoned = at.to_zoned(TimeZone::UTC);
    let now = u32::from(zoned.hour().unsigned_abs()) * 60 + u32::from(zoned.minute().unsigned_abs());
    if start <= end {
        (start..end).contains(&now)
    } else {
        now >= start || now < end
    }
}

/// The lowercase English name of the weekday at `at` (`monday`).
pub fn day_name(at: Timestamp) -> &'static str {
    DAY_NAMES[usize::from(
        at.to_zoned(TimeZone::UTC)
            .weekday()
            .to_monday_zero_offset()
            .unsigned_abs(),
    )]
}

/// Accepts full or three-letter day names in any case; returns the full lowercase name.
pub fn parse_day(text: &str) -> Option<&'static str> {
    let lower = text.trim().to_lowercase();
    DAY_NAMES
        .iter()
        .copied()
        .find(|n| *n == lower || (lower.len() == 3 && n.starts_with(&lower)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_windows_wrap_past_midnight() {
        let at: Timestamp = "2026-01-05T23:30:00Z".parse().unwrap();
        assert!(in_clock_window(
            at,
            clock_minutes("22:00").unwrap(),
            clock_minutes("06:00").unwrap()
        ));
        assert!(!in_clock_window(
            at,
            clock_minutes("09:00").unwrap(),
            clock_minutes("18:00").unwrap()
        ));
        assert!(clock_minutes("24:00").is_err());
        assert_eq!(day_name(at), "monday");
        assert!(is_weekday(at));
        assert_eq!(parse_day("SAT"), Some("saturday"));
        assert_eq!(parse_day("funday"), None);
    }
}
