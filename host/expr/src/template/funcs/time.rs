//! Time notes. "Now" comes from the evaluation [`Env`], so tests pin the clock; all times
//! are UTC.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;

use super::args::{Result, between, exactly, string, text};
use super::entry::Entry;
use crate::calendar::{clock_minutes, in_clock_window, is_weekday};
use crate::duration::{format_go, parse_seconds};
use crate::template::env::Env;
use crate::template::value::{as_f64, number};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "now",
        func: now,
        usage: "now",
        doc: "the current time, RFC 3339",
    },
    Entry {
        name: "timeAgo",
        func: time_ago,
        usage: "timeAgo TIME",
        doc: "how long ago, in words: \"5m ago\", \"3d ago\"",
    },
    Entry {
        name: "timeSince",
        func: time_since,
        usage: "timeSince TIME",
        doc: "the Go duration since TIME (\"1h2m3s\")",
    },
    Entry {
        name: "timeUntil",
        func: time_until,
        usage: "timeUntil TIME",
        doc: "the Go duration until TIME, \"0s\" when past (fits requeue.after)",
    },
    Entry {
        name: "timeFormat",
        func: time_format,
        usage: "timeFormat LAYOUT [TIME]",
        doc: "TIME (default now) in a Go layout (\"2006-01-02\") or a named one (RFC3339, DateOnly, Kitchen, ...)",
    },
    Entry {
        name: "isExpired",
        func: is_expired,
        usage: "isExpired TIME",
        doc: "TIME is now or in the past",
    },
    Entry {
        name: "durationSeconds",
        func: duration_seconds,
        usage: "durationSeconds DURATION",
        doc: "seconds in a duration (\"1h\" → 3600; d, w, mo, y allowed)",
    },
    Entry {
        name: "durationAdd",
        func: duration_add,
        usage: "durationAdd DURATION [TIME]",
        doc: "TIME (default now) plus DURATION, RFC 3339",
    },
    Entry {
        name: "durationValid",
        func: duration_valid,
        usage: "durationValid TEXT",
        doc: "TEXT is a valid duration",
    },
    Entry {
        name: "weekday",
        func: weekday,
        usage: "weekday",
        doc: "today is Monday to Friday",
    },
    Entry {
        name: "weekend",
        func: weekend,
        usage: "weekend",
        doc: "today is Saturday or Sunday",
    },
    Entry {
        name: "timeInWindow",
        func: in_window,
        usage: "timeInWindow START END",
        doc: "now is within HH:MM START..END (wraps past midnight when END < START)",
    },
    Entry {
        name: "timeNotInWindow",
        func: not_in_window,
        usage: "timeNotInWindow START END",
        doc: "now is outside the window",
    },
    Entry {
        name: "nextCron",
        func: next_cron,
        usage: "nextCron EXPR",
        doc: "the next firing time of a cron expression, RFC 3339",
    },
];

/// A time from RFC 3339 text, a date (`2006-01-02`) or Unix seconds.
pub fn parse_time(value: &Value) -> std::result::Result<Timestamp, String> {
    match value {
        Value::String(s) => {
            let s = s.trim();
            s.parse::<Timestamp>()
                .or_else(|_| {
                    s.parse::<jiff::civil::Date>()
                        .map(|d| d.to_zoned(TimeZone::UTC).map(|z| z.timestamp()))
                        .and_then(|r| r)
                })
                .map_err(|_| format!("not a time: {s:?} (want RFC 3339, e.g. 2026-01-02T15:04:05Z)"))
        }
        Value::Number(_) => {
            let seconds = as_f64(value).unwrap_or(0.0);
            Timestamp::from_second(seconds as i64).map_err(|e| e.to_string())
        }
        other => Err(format!("not a time: {}", crate::template::value::display(other))),
    }
}

fn rfc3339(ts: Timestamp) -> Value {
    string(crate::calendar::rfc3339(ts))
}

fn seconds_between(from: Timestamp, to: Timestamp) -> f64 {
    (to.as_nanosecond() - from.as_nanosecond()) as f64 / 1e9
}

fn now(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 0)?;
    Ok(rfc3339(env.now))
}

fn time_ago(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let seconds = seconds_between(parse_time(args[0])?, env.now);
    if seconds < 1.0 {
        return Ok(string("just now"));
    }
    let (value, unit) = match seconds {
        s if s < 60.0 => (s, "s"),
        s if s < 3600.0 => (s / 60.0, "m"),
        s if s < 86_400.0 => (s / 3600.0, "h"),
        s => (s / 86_400.0, "d"),
    };
    Ok(string(format!("{}{unit} ago", value.floor())))
}

fn time_since(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(format_go(
        seconds_between(parse_time(args[0])?, env.now).round(),
    )))
}

fn time_until(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(format_go(
        seconds_between(env.now, parse_time(args[0])?).round().max(0.0),
    )))
}

fn time_format(env: &Env<'_>, args: &[&Value]) -> Result {
    between(args, 1, 2)?;
    let at = if args.len() == 2 { parse_time(args[1])? } else { env.now };
    Ok(string(go_format(at, &text(args, 0))))
}

fn is_expired(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(parse_time(args[0])? <= env.now))
}

fn duration_seconds(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(number(parse_seconds(&text(args, 0))?))
}

fn duration_add(env: &Env<'_>, args: &[&Value]) -> Result {
    between(args, 1, 2)?;
    let at = if args.len() == 2 { parse_time(args[1])? } else { env.now };
    let nanos = (parse_seconds(&text(args, 0))? * 1e9) as i128;
    let ts = Timestamp::from_nanosecond(at.as_nanosecond() + nanos).map_err(|e| e.to_string())?;
    Ok(rfc3339(ts))
}

fn duration_valid(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(parse_seconds(&text(args, 0)).is_ok()))
}

fn weekday(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 0)?;
    Ok(Value::Bool(is_weekday(env.now)))
}

fn weekend(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 0)?;
    Ok(Value::Bool(!is_weekday(env.now)))
}

fn window(env: &Env<'_>, args: &[&Value]) -> Result<bool> {
    exactly(args, 2)?;
    Ok(in_clock_window(
        env.now,
        clock_minutes(&text(args, 0))?,
        clock_minutes(&text(args, 1))?,
    ))
}

fn in_window(env: &Env<'_>, args: &[&Value]) -> Result {
    window(env, args).map(Value::Bool)
}

fn not_in_window(env: &Env<'_>, args: &[&Value]) -> Result {
    window(env, args).map(|inside| Value::Bool(!inside))
}

fn next_cron(env: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let schedule = crate::cron::Schedule::parse(&text(args, 0))?;
    schedule
        .next_after(env.now)
        .map(rfc3339)
        .ok_or_else(|| "the schedule never fires within five years".into())
}

/// Formats with a Go reference layout (`Mon Jan 2 15:04:05 MST 2006`) or a named layout.
pub fn go_format(at: Timestamp, layout: &str) -> String {
    let layout = match layout {
        "RFC3339" => "2006-01-02T15:04:05Z07:00",
        "RFC3339Nano" => "2006-01-02T15:04:05.999999999Z07:00",
        "RFC1123" => "Mon, 02 Jan 2006 15:04:05 MST",
        "RFC822" => "02 Jan 06 15:04 MST",
        "Kitchen" => "3:04PM",
        "DateOnly" => "2006-01-02",
        "TimeOnly" => "15:04:05",
        "DateTime" => "2006-01-02 15:04:05",
        "ANSIC" => "Mon Jan _2 15:04:05 2006",
        other => other,
    };
    let z = at.to_zoned(TimeZone::UTC);
    // Longer tokens first, as Go's own layout scanner prefers them.
    const TOKENS: &[&str] = &[
        "January",
        "Monday",
        "2006",
        ".000000000",
        ".999999999",
        ".000000",
        ".999999",
        ".000",
        ".999",
        "Z07:00",
        "-07:00",
        "Z0700",
        "-0700",
        "Jan",
        "Mon",
        "MST",
        "Z07",
        "-07",
        "01",
        "02",
        "_2",
        "03",
        "04",
        "05",
        "06",
        "15",
        "PM",
        "pm",
        "1",
        "2",
        "3",
        "4",
        "5",
    ];
    let mut out = String::new();
    let mut rest = layout;
    'scan: while !rest.is_empty() {
        for token in TOKENS {
            if let Some(after) = rest.strip_prefix(token) {
                let hour12 = match z.hour() % 12 {
                    0 => 12,
                    h => h,
                };
                let nanos = z.subsec_nanosecond();
                let piece = match *token {
                    "January" => z.strftime("%B").to_string(),
                    "Monday" => z.strftime("%A").to_string(),
                    "2006" => format!("{:04}", z.year()),
                    "Jan" => z.strftime("%b").to_string(),
                    "Mon" => z.strftime("%a").to_string(),
                    "MST" => "UTC".into(),
                    "Z07:00" | "Z0700" | "Z07" => "Z".into(),
                    "-07:00" => "+00:00".into(),
                    "-0700" => "+0000".into(),
                    "-07" => "+00".into(),
                    "01" => format!("{:02}", z.month()),
                    "02" => format!("{:02}", z.day()),
                    "_2" => format!("{:>2}", z.day()),
                    "03" => format!("{hour12:02}"),
                    "04" => format!("{:02}", z.minute()),
                    "05" => format!("{:02}", z.second()),
                    "06" => format!("{:02}", z.year() % 100),
                    "15" => format!("{:02}", z.hour()),
                    "PM" => (if z.hour() >= 12 { "PM" } else { "AM" }).into(),
                    "pm" => (if z.hour() >= 12 { "pm" } else { "am" }).into(),
                    "1" => z.month().to_string(),
                    "2" => z.day().to_string(),
                    "3" => hour12.to_string(),
                    "4" => z.minute().to_string(),
                    "5" => z.second().to_string(),
                    t if t.starts_with(".0") => format!(".{:0>9}", nanos)[..t.len()].to_string(),
                    t => {
                        let digits = format!("{nanos:09}")[..t.len() - 1].trim_end_matches('0').to_string();
                        if digits.is_empty() {
                            String::new()
                        } else {
                            format!(".{digits}")
                        }
                    }
                };
                out.push_str(&piece);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}
