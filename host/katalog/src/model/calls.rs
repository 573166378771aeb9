//! Calls out: an HTTP (or other protocol) call whose result lands in `.external.<name>`, and
//! the retry backoff shape it shares with reconcile.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use orkestra_expr::condition::ConditionSpec;

/// An HTTP call whose result lands in `.external.<name>`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalCall {
    pub name: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<Value>,
    /// http (default), prometheus, redis, postgres, ...
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub query: Option<String>,
    /// Default 10s.
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub expected_status: Option<Value>,
    #[serde(default)]
    pub continue_on_error: bool,
    #[serde(default)]
    pub cache_for: Option<String>,
    #[serde(default)]
    pub retry_backoff: Option<RetryBackoff>,
    #[serde(default)]
    pub auth: Option<Value>,
    /// A bearer token (templated): sent as `Authorization: Bearer <token>` unless the
    /// headers set Authorization themselves.
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub fires: Option<Value>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}

/// In-process retries of a failed reconcile: `"5s"` (initial) or the full form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetryBackoff {
    pub initial: Option<String>,
    pub max: Option<String>,
    pub multiplier: Option<f64>,
    pub max_attempts: Option<u32>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RetryBackoffFull {
    #[serde(default)]
    initial: Option<String>,
    #[serde(default)]
    max: Option<String>,
    #[serde(default)]
    multiplier: Option<f64>,
    #[serde(default)]
    max_attempts: Option<u32>,
}

impl serde::Serialize for RetryBackoff {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RetryBackoffFull {
            initial: self.initial.clone(),
            max: self.max.clone(),
            multiplier: self.multiplier,
            max_attempts: self.max_attempts,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RetryBackoff {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BackoffVisitor;
        impl<'de> serde::de::Visitor<'de> for BackoffVisitor {
            type Value = RetryBackoff;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration or {initial, max, multiplier, maxAttempts}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RetryBackoff, E> {
                Ok(RetryBackoff {
                    initial: Some(v.to_string()),
                    ..RetryBackoff::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RetryBackoff, A::Error> {
                let full = RetryBackoffFull::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RetryBackoff {
                    initial: full.initial,
                    max: full.max,
                    multiplier: full.multiplier,
                    max_attempts: full.max_attempts,
                })
            }
        }
        deserializer.deserialize_any(BackoffVisitor)
    }
}
