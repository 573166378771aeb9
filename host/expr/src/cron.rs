//! Five-field cron schedules (minute hour day-of-month month day-of-week, UTC) with the
//! `@hourly`-style macros: parse once, then find the next or previous firing time.
//!
//! Day-of-month and day-of-week follow Vixie cron: when both are restricted, a day matches
//! if either does.

use jiff::civil::{Date, DateTime, Time};
use jiff::{Timestamp, tz::TimeZone};

use crate::error::Error;

/// The field names, in order.
pub const FIELDS: [&str; 5] = ["minute", "hour", "dom", "month", "dow"];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    doms: u64,
    months: u64,
    dows: u64,
    dom_any: bool,
    dow_any: bool,
    /// The five fields as written (after macro expansion and whitespace normalisation).
    pub fields: [String; 5],
}

/// Expands a macro (`@daily`, ...) and collapses whitespace; other text is returned as is.
pub fn normalize(expr: &str) -> String {
    match expr.trim() {
        "@yearly" | "@annually" => "0 0 1 1 *".into(),
        "@monthly" => "0 0 1 * *".into(),
        "@weekly" => "0 0 * * 0".into(),
        "@daily" | "@midnight" => "0 0 * * *".into(),
        "@hourly" => "0 * * * *".into(),
        other => other.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

impl Schedule {
    /// Parses a five-field expression or a macro.
    ///
    /// # Errors
    /// A message naming the field and the part that is wrong.
    pub fn parse(expr: &str) -> Result<Self, Error> {
        let normalized = normalize(expr);
        let parts: Vec<&str> = normalized.split(' ').filter(|p| !p.is_empty()).collect();
        if parts.len() != 5 {
            return Err(Error::Cron(format!(
                "cron expression {expr:?} has {} fields, want 5 (minute hour dom month dow)",
                parts.len()
            )));
        }
        let field = |i: usize, min: u32, max: u32, names: &[&str]| parse_field(parts[i], min, max, names, FIELDS[i]);
        let mut dows = field(4, 0, 7, &DAYS)?;
        // 7 is Sunday too.
        if dows & (1 << 7) != 0 {
            dows |= 1;
        }
        Ok(Self {
            minutes: field(0, 0, 59, &[])?,
            hours: field(1, 0, 23, &[])?,
            doms: field(2, 1, 31, &[])?,
            months: field(3, 1, 12, &MONTHS)?,
            dows,
            dom_any: parts[2] == "*" || parts[2] == "?",
            dow_any: parts[4] == "*" || parts[4] == "?",
            fields: parts
                .iter()
                .map(|p| (*p).to_string())
                .collect::<Vec<_>>()
                .try_into()
                .unwrap_or_default(),
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.doms & (1 << date.day()) != 0;
        let dow = self.dows & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.dom_any, self.dow_any) {
            (true, true) => true,
            (false, true) => dom,
            (true, false) => dow,
            (false, false) => dom || dow,
        }
    }

    fn matches(&self, dt: DateTime) -> bool {
        self.months & (1 << dt.month()) != 0
            && self.day_matches(dt.date())
            && self.hours & (1 << dt.hour()) != 0
            && self.minutes & (1 << dt.minute()) != 0
    }

    /// The first firing time strictly after `after`, within five years.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let start = after.to_zoned(TimeZone::UTC).datetime();
        let mut dt = start
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(jiff::Span::new().minutes(1))
            .ok()?;
        let limit = start.checked_add(jiff::Span::new().years(5)).ok()?;
        while dt <= limit {
            if self.months & (1 << dt.month()) == 0 {
                let first = dt
                    .date()
                    .first_of_month()
                    .checked_add(jiff::Span::new().months(1))
                    .ok()?;
                dt = first.to_datetime(Time::midnight());
                continue;
            }
            if !self.day_matches(dt.date()) {
                dt = dt.date().tomorrow().ok()?.to_datetime(Time::midnight());
                continue;
            }
            if self.hours & (1 << dt.hour()) == 0 {
                dt = dt
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(jiff::Span::new().hours(1))
                    .ok()?;
                continue;
            }
            if self.minutes & (1 << dt.minute()) == 0 {
                dt = dt.checked_add(jiff::Span::new().minutes(1)).ok()?;
                continue;
            }
            return dt.to_zoned(TimeZone::UTC).ok().map(|z| z.timestamp());
        }
        None
    }

    /// The last firing time at or before `at`, within one year (minute by minute from the
    /// hour down, so a busy schedule is found fast and a yearly one still within bounds).
    pub fn previous_at_or_before(&self, at: Timestamp) -> Option<Timestamp> {
        let start = at
            .to_zoned(TimeZone::UTC)
            .datetime()
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?;
        let limit = start.checked_sub(jiff::Span::new().years(1)).ok()?;
        let mut dt = start;
        while dt >= limit {
            if !self.day_matches(dt.date()) || self.months & (1 << dt.month()) == 0 {
                // Jump to the last minute of the previous day.
                dt = dt.date().yesterday().ok()?.to_datetime(Time::constant(23, 59, 0, 0));
                continue;
            }
            if self.hours & (1 << dt.hour()) == 0 {
                dt = dt
                    .with()
                    .minute(59)
                    .build()
                    .ok()?
                    .checked_sub(jiff::Span::new().hours(1))
                    .ok()?;
                continue;
            }
            if self.matches(dt) {
                return dt.to_zoned(TimeZone::UTC).ok().map(|z| z.timestamp());
            }
            dt = dt.checked_sub(jiff::Span::new().minutes(1)).ok()?;
        }
        None
    }

    /// A short English description, e.g. "at minute 0 past every hour".
    pub fn describe(&self) -> String {
        let [minute, hour, dom, month, dow] = &self.fields;
        let time = match (minute.as_str(), hour.as_str()) {
            ("*", "*") => "every minute".to_string(),
            (m, "*") if is_number(m) => format!("at minute {m} past every hour"),
            (m, h) if is_number(m) && is_number(h) => format!("at {h:0>2}:{m:0>2}"),
            (m, h) => format!("at minute {m} past hour {h}"),
        };
        let mut parts = vec![time];
        if dom != "*" && dom != "?" {
            parts.push(format!("on day-of-month {dom}"));
        }
        if dow != "*" && dow != "?" {
            parts.push(format!("on day-of-week {dow}"));
        }
        if month != "*" {
            parts.push(format!("in month {month}"));
        }
        parts.join(" ")
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

fn parse_field(text: &str, min: u32, max: u32, names: &[&str], field: &str) -> Result<u64, Error> {
    let wrong = |why: String| Error::Cron(format!("{field}: {why}"));
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| wrong(format!("bad step {s:?}")))?;
                if step == 0 {
                    return Err(wrong("step must be positive".into()));
                }
                (r, step)
            }
            None => (item, 1),
        };
        let value = |s: &str| -> Result<u32, Error> {
            let lower = s.to_ascii_lowercase();
            let n = if let Some(i) = names.iter().position(|n| *n == lower) {
                i as u32 + if names.len() == 12 { 1 } else { 0 }
            } else {
                s.parse().map_err(|_| wrong(format!("{s:?} is not a number")))?
            };
            if n < min || n > max {
                return Err(wrong(format!("{n} is outside {min}-{max}")));
            }
            Ok(n)
        };
        let (from, to) = match range {
            "*" | "?" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if step > 1 => (value(r)?, max),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(wrong(format!("range {from}-{to} is backwards")));
        }
        let mut n = from;
        while n <= to {
            bits |= 1 << n;
            n += step;
        }
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn next_after_finds_the_next_minute_that_matches() {
        let every_15 = Schedule::parse("*/15 * * * *").unwrap();
        assert_eq!(
            every_15.next_after(ts("2026-01-01T10:07:30Z")),
            Some(ts("2026-01-01T10:15:00Z"))
        );
        let weekdays_9 = Schedule::parse("0 9 * * mon-fri").unwrap();
        // 2026-01-03 is a Saturday: the next run is Monday the 5th.
        assert_eq!(
            weekdays_9.next_after(ts("2026-01-03T12:00:00Z")),
            Some(ts("2026-01-05T09:00:00Z"))
        );
        let yearly = Schedule::parse("@yearly").unwrap();
        assert_eq!(
            yearly.next_after(ts("2026-06-01T00:00:00Z")),
            Some(ts("2027-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn previous_finds_the_last_fire() {
        let hourly = Schedule::parse("@hourly").unwrap();
        assert_eq!(
            hourly.previous_at_or_before(ts("2026-01-01T10:07:30Z")),
            Some(ts("2026-01-01T10:00:00Z"))
        );
        let daily_6 = Schedule::parse("0 6 * * *").unwrap();
        assert_eq!(
            daily_6.previous_at_or_before(ts("2026-01-02T05:00:00Z")),
            Some(ts("2026-01-01T06:00:00Z"))
        );
    }

    #[test]
    fn dom_and_dow_both_restricted_match_either() {
        let s = Schedule::parse("0 0 13 * fri").unwrap();
        // 2026-02-06 is a Friday (not the 13th); 2026-02-13 is also a Friday.
        assert_eq!(
            s.next_after(ts("2026-02-01T00:00:00Z")),
            Some(ts("2026-02-06T00:00:00Z"))
        );
    }

    #[test]
    fn parse_errors_name_the_field() {
        assert!(
            Schedule::parse("* * *")
                .unwrap_err()
                .to_string()
                .contains("has 3 fields")
        );
        assert!(
            Schedule::parse("61 * * * *")
                .unwrap_err()
                .to_string()
                .contains("minute: 61 is outside 0-59")
        );
        assert!(
            Schedule::parse("* * * foo *")
                .unwrap_err()
                .to_string()
                .contains("month: \"foo\" is not a number")
        );
        assert!(
            Schedule::parse("*/0 * * * *")
                .unwrap_err()
                .to_string()
                .contains("step must be positive")
        );
    }
}
