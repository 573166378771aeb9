//! How each provider proves a delivery is its own: an HMAC-SHA256 of the body (GitHub), of
//! `v0:{timestamp}:{body}` (Slack) or of `{timestamp}.{body}` (generic), or a shared token
//! (GitLab). Every comparison is constant-time; a timestamped signature holds for five
//! minutes either way, so a captured delivery cannot be played again later.

use ring::hmac;

use orkestra_katalog::model::Provider;

/// How far a signed timestamp may be from the gateway's clock, in seconds.
pub const WINDOW_SECS: i64 = 300;

/// Why a delivery was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no {0} header")]
    Missing(&'static str),
    #[error("the {0} header is malformed")]
    Malformed(&'static str),
    #[error("the signature does not match the webhook's secret")]
    Mismatch,
    #[error("the signed timestamp is {0} s from the gateway's clock (at most {WINDOW_SECS} s)")]
    Stale(i64),
}

/// GitHub: `X-Hub-Signature-256: sha256=<hex of HMAC(secret, body)>`.
pub fn github(secret: &str, header: Option<&str>, body: &[u8]) -> Result<(), Refused> {
    const NAME: &str = "X-Hub-Signature-256";
    let given = header.ok_or(Refused::Missing(NAME))?;
    let hex = given.strip_prefix("sha256=").ok_or(Refused::Malformed(NAME))?;
    check(secret, body, hex, NAME)
}

/// GitLab: `X-Gitlab-Token`, the secret itself.
pub fn gitlab(secret: &str, header: Option<&str>) -> Result<(), Refused> {
    let given = header.ok_or(Refused::Missing("X-Gitlab-Token"))?;
    // Both sides hashed first, so the comparison takes the same time whatever the lengths.
    let digest = |s: &str| ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    match crate::tokens::same(digest(secret).as_ref(), digest(given).as_ref()) {
        true => Ok(()),
        false => Err(Refused::Mismatch),
    }
}

/// Slack: `X-Slack-Signature: v0=<hex of HMAC(secret, "v0:{ts}:{body}")>` with
/// `X-Slack-Request-Timestamp: {ts}` within the window of `now` (Unix seconds).
pub fn slack(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), Refused> {
    let scheme = Stamped {
        timestamp: "X-Slack-Request-Timestamp",
        signature: "X-Slack-Signature",
        prefix: "v0=",
    };
    scheme.check(secret, (timestamp, signature), now, |ts| {
        [b"v0:", ts, b":", body].concat()
    })
}

/// Generic: `X-Orkestra-Signature: sha256=<hex of HMAC(secret, "{ts}.{body}")>` with
/// `X-Orkestra-Timestamp: {ts}` within the window of `now`.
pub fn generic(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), Refused> {
    let scheme = Stamped {
        timestamp: "X-Orkestra-Timestamp",
        signature: "X-Orkestra-Signature",
        prefix: "sha256=",
    };
    scheme.check(secret, (timestamp, signature), now, |ts| [ts, b".", body].concat())
}

/// A signature over a timestamp and the body: its two headers and the signature's prefix.
struct Stamped {
    timestamp: &'static str,
    signature: &'static str,
    prefix: &'static str,
}

impl Stamped {
    /// Both headers present, the timestamp within the window, and the signature over
    /// `message(timestamp)`.
    fn check(
        &self,
        secret: &str,
        (timestamp, signature): (Option<&str>, Option<&str>),
        now: i64,
        message: impl Fn(&[u8]) -> Vec<u8>,
    ) -> Result<(), Refused> {
        let ts = timestamp.ok_or(Refused::Missing(self.timestamp))?;
        let hex = signature
            .ok_or(Refused::Missing(self.signature))?
            .strip_prefix(self.prefix)
            .ok_or(Refused::Malformed(self.signature))?;
        fresh(ts, now, self.timestamp)?;
        check(secret, &message(ts.as_bytes()), hex, self.signature)
    }
}

/// What can be checked of a delivery's proof before its body is read: its headers are there
/// and well formed, and a signed timestamp is within the window of `now`.
pub fn before_body<'h>(provider: Provider, header: impl Fn(&str) -> Option<&'h str>, now: i64) -> Result<(), Refused> {
    let signed = |name: &'static str, prefix: &str| {
        let value = header(name).ok_or(Refused::Missing(name))?;
        let hex = value.strip_prefix(prefix).ok_or(Refused::Malformed(name))?;
        from_hex(hex).map(|_| ()).ok_or(Refused::Malformed(name))
    };
    let stamped = |name: &'static str| fresh(header(name).ok_or(Refused::Missing(name))?, now, name);
    match provider {
        Provider::GitHub => signed("X-Hub-Signature-256", "sha256="),
        Provider::GitLab => header("X-Gitlab-Token")
            .map(|_| ())
            .ok_or(Refused::Missing("X-Gitlab-Token")),
        Provider::Slack => {
            stamped("X-Slack-Request-Timestamp")?;
            signed("X-Slack-Signature", "v0=")
        }
        Provider::Generic => {
            stamped("X-Orkestra-Timestamp")?;
            signed("X-Orkestra-Signature", "sha256=")
        }
    }
}

/// What a genuine delivery is known by, to take it once, and for how long its proof holds
/// (`None`: no timestamp bounds it). The provider's delivery id where it gives one, else
/// the signature (over the timestamp and the body), else the body's digest.
pub fn delivery_id<'h>(
    provider: Provider,
    header: impl Fn(&str) -> Option<&'h str>,
    body: &[u8],
) -> (String, Option<std::time::Duration>) {
    // Either side of the gateway's clock.
    let window = Some(std::time::Duration::from_secs(2 * WINDOW_SECS as u64));
    let digest = || to_hex(ring::digest::digest(&ring::digest::SHA256, body).as_ref());
    match provider {
        Provider::GitHub => (header("X-GitHub-Delivery").map_or_else(digest, str::to_string), None),
        Provider::GitLab => (header("X-Gitlab-Event-UUID").map_or_else(digest, str::to_string), None),
        Provider::Slack => (header("X-Slack-Signature").map_or_else(digest, str::to_string), window),
        Provider::Generic => (
            header("X-Orkestra-Signature").map_or_else(digest, str::to_string),
            window,
        ),
    }
}

/// The generic scheme's signature of `body` at `ts`, as a sender computes it.
pub fn sign_generic(secret: &str, ts: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let tag = hmac::sign(&key, &[ts.to_string().as_bytes(), b".", body].concat());
    format!("sha256={}", to_hex(tag.as_ref()))
}

fn fresh(ts: &str, now: i64, header: &'static str) -> Result<(), Refused> {
    let at: i64 = ts.trim().parse().map_err(|_| Refused::Malformed(header))?;
    let off = now.saturating_sub(at).saturating_abs();
    if off > WINDOW_SECS {
        return Err(Refused::Stale(off));
    }
    Ok(())
}

fn check(secret: &str, message: &[u8], hex: &str, header: &'static str) -> Result<(), Refused> {
    let tag = from_hex(hex).ok_or(Refused::Malformed(header))?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    hmac::verify(&key, message, &tag).map_err(|_| Refused::Mismatch)
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || hex.len() > 128 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(secret: &str, message: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        to_hex(hmac::sign(&key, message).as_ref())
    }

    #[test]
    fn github_takes_its_own_signature_only() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let good = format!("sha256={}", mac("s3cret", body));
        assert_eq!(github("s3cret", Some(&good), body), Ok(()));
        assert_eq!(github("other", Some(&good), body), Err(Refused::Mismatch));
        assert_eq!(github("s3cret", Some(&good), b"{}"), Err(Refused::Mismatch));
        assert_eq!(
            github("s3cret", None, body),
            Err(Refused::Missing("X-Hub-Signature-256"))
        );
        assert_eq!(
            github("s3cret", Some("sha1=00"), body),
            Err(Refused::Malformed("X-Hub-Signature-256"))
        );
        assert_eq!(
            github("s3cret", Some("sha256=zz"), body),
            Err(Refused::Malformed("X-Hub-Signature-256"))
        );
    }

    #[test]
    fn gitlab_compares_the_token() {
        assert_eq!(gitlab("t0ken", Some("t0ken")), Ok(()));
        assert_eq!(gitlab("t0ken", Some("t0ke")), Err(Refused::Mismatch));
        assert_eq!(gitlab("t0ken", None), Err(Refused::Missing("X-Gitlab-Token")));
    }

    #[test]
    fn slack_signs_version_timestamp_and_body_within_five_minutes() {
        let body = b"command=%2Fdeploy&text=site+name%3Dblog";
        let now = 1_800_000_000;
        let sig = |ts: i64| {
            format!(
                "v0={}",
                mac(
                    "sign",
                    format!("v0:{ts}:")
                        .as_bytes()
                        .iter()
                        .chain(body)
                        .copied()
                        .collect::<Vec<_>>()
                        .as_slice()
                )
            )
        };
        assert_eq!(
            slack("sign", Some(&now.to_string()), Some(&sig(now)), body, now),
            Ok(())
        );
        let old = now - 301;
        assert_eq!(
            slack("sign", Some(&old.to_string()), Some(&sig(old)), body, now),
            Err(Refused::Stale(301))
        );
        // A signature moved to another timestamp does not hold.
        assert_eq!(
            slack("sign", Some(&(now + 1).to_string()), Some(&sig(now)), body, now),
            Err(Refused::Mismatch)
        );
    }

    #[test]
    fn generic_round_trips_its_own_signing() {
        let body = br#"{"target":"site","name":"blog"}"#;
        let now = 1_800_000_000;
        let signature = sign_generic("k", now, body);
        assert_eq!(
            generic("k", Some(&now.to_string()), Some(&signature), body, now + 10),
            Ok(())
        );
        assert_eq!(
            generic("k", Some(&now.to_string()), Some(&signature), body, now + 400),
            Err(Refused::Stale(400))
        );
        assert_eq!(
            generic("k", Some("yesterday"), Some(&signature), body, now),
            Err(Refused::Malformed("X-Orkestra-Timestamp"))
        );
        assert_eq!(
            generic("k", Some(&now.to_string()), Some(&signature), b"{}", now),
            Err(Refused::Mismatch)
        );
    }
}
