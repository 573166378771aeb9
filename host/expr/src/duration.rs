//! Durations as Katalogs write them: Go syntax (`1h30m`, `500ms`, `1.5h`) plus the extended
//! units `d` (24h), `w` (7d), `mo` (30d) and `y` (365d); a bare number is seconds.

use std::time::Duration;

use crate::error::Error;

/// Parses a Katalog duration.
///
/// # Errors
/// A message naming what is wrong with the text.
pub fn parse(text: &str) -> Result<Duration, Error> {
    let seconds = parse_seconds(text)?;
    if seconds < 0.0 {
        return Err(Error::Duration(format!("duration {text:?} is negative")));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| Error::Duration(format!("duration {text:?} is out of range")))
}

/// Parses a possibly negative duration into seconds.
pub fn parse_seconds(text: &str) -> Result<f64, Error> {
    let s = text.trim();
    if s.is_empty() {
        return Err(Error::Duration("empty duration".into()));
    }
    if let Ok(seconds) = s.parse::<f64>() {
        return Ok(seconds);
    }
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(Error::Duration(format!(
                "invalid duration {text:?}: expected a number at {rest:?}"
            )));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| Error::Duration(format!("invalid duration {text:?}")))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "mo" => 2_592_000.0,
            "y" => 31_536_000.0,
            "" => {
                return Err(Error::Duration(format!(
                    "invalid duration {text:?}: missing unit after {value}"
                )));
            }
            other => {
                return Err(Error::Duration(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ns, us, ms, s, m, h, d, w, mo, y)"
                )));
            }
        };
        total += value * scale;
    }
    Ok(if negative { -total } else { total })
}

/// Formats like Go's `time.Duration.String`: `1h2m3s`, `1.5s`, `500ms`, `0s`.
pub fn format_go(seconds: f64) -> String {
    if seconds == 0.0 {
        return "0s".into();
    }
    let sign = if seconds < 0.0 { "-" } else { "" };
    let abs = seconds.abs();
    if abs < 1.0 {
        let (value, unit) = if abs < 1e-6 {
            (abs * 1e9, "ns")
        } else if abs < 1e-3 {
            (abs * 1e6, "µs")
        } else {
            (abs * 1e3, "ms")
        };
        return format!("{sign}{}{unit}", trim_float(value));
    }
    let whole_hours = (abs / 3600.0).floor();
    let minutes = ((abs - whole_hours * 3600.0) / 60.0).floor();
    let secs = abs - whole_hours * 3600.0 - minutes * 60.0;
    let secs = trim_float((secs * 1e9).round() / 1e9);
    if whole_hours > 0.0 {
        format!("{sign}{whole_hours:.0}h{minutes:.0}m{secs}s")
    } else if minutes > 0.0 {
        format!("{sign}{minutes:.0}m{secs}s")
    } else {
        format!("{sign}{secs}s")
    }
}

fn trim_float(value: f64) -> String {
    let text = format!("{value:.9}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_go_and_extended_units() {
        for (text, seconds) in [
            ("1h30m", 5400.0),
            ("500ms", 0.5),
            ("1.5h", 5400.0),
            ("90d", 7_776_000.0),
            ("1w", 604_800.0),
            ("2mo", 5_184_000.0),
            ("1y", 31_536_000.0),
            ("30", 30.0),
            ("-5s", -5.0),
            ("1m30s", 90.0),
        ] {
            assert_eq!(parse_seconds(text), Ok(seconds), "{text}");
        }
        assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn parse_rejects_bad_text_with_a_reason() {
        assert!(parse("").unwrap_err().to_string().contains("empty"));
        assert!(parse("5").is_ok());
        assert!(parse("5x").unwrap_err().to_string().contains("unknown unit \"x\""));
        assert!(parse("h").unwrap_err().to_string().contains("expected a number"));
        assert!(parse("-1s").unwrap_err().to_string().contains("negative"));
    }

    #[test]
    fn format_go_matches_go_duration_strings() {
        for (seconds, text) in [
            (0.0, "0s"),
            (3723.0, "1h2m3s"),
            (3600.0, "1h0m0s"),
            (90.0, "1m30s"),
            (1.5, "1.5s"),
            (0.5, "500ms"),
            (-2.0, "-2s"),
        ] {
            assert_eq!(format_go(seconds), text, "{seconds}");
        }
    }
}
