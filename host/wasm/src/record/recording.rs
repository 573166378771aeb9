//! A recording as it is written: one call of a component, everything that crossed the
//! host-function boundary, as readable JSON. The WIT types carry objects as JSON text; here
//! they are JSON values, so a recording reads (and diffs) as the objects it holds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::bindings::types::{Event, EventType, Failure, Gvk, Outcome, Request, Response};
pub use super::super::capability::kube::exchange::{KubeAnswer, KubeCall};
use super::super::capability::kube::exchange::{text_of, value_of};
use super::super::hook::{CallError, Hook};

/// The format's version; a reader refuses others.
pub const FORMAT: u32 = 1;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recording {
    pub format: u32,
    /// When the call ran (RFC 3339).
    pub at: String,
    pub component: Recorded,
    pub hook: HookName,
    pub request: RequestRecord,
    /// Each kube call, in the order the guest made them, with the answer it got.
    pub kube: Vec<Exchange>,
    /// What the guest read of the clocks and random sources.
    pub wasi: WasiReads,
    /// Lines the guest logged (not compared on replay: wording is not behaviour).
    #[serde(default)]
    pub logs: Vec<String>,
    pub result: CallResult,
    /// Whether Secret values were replaced with a placeholder (no grant allowed them).
    pub secrets_redacted: bool,
}

/// The component a recording was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recorded {
    /// Its slot: `crd` or `crd/target`.
    pub slot: String,
    /// `hook` or `constructor`.
    pub world: String,
    /// Where it was loaded from, as the Katalog declared it.
    pub source: String,
    pub digest: String,
    pub revision: u64,
    pub limits: LimitsRecord,
}

/// The per-call limits the call ran under, so a replay holds the guest to the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsRecord {
    pub timeout_ms: u64,
    pub memory: usize,
    pub result_size: usize,
    pub kube_calls: u32,
    pub kube_bytes: usize,
    pub children: usize,
    pub events: usize,
    pub log_bytes: usize,
    pub fuel: Option<u64>,
}

impl From<&orkestra_katalog::component::Limits> for LimitsRecord {
    fn from(limits: &orkestra_katalog::component::Limits) -> Self {
        Self {
            timeout_ms: limits.timeout.as_millis() as u64,
            memory: limits.memory,
            result_size: limits.result_size,
            kube_calls: limits.kube_calls,
            kube_bytes: limits.kube_bytes,
            children: limits.children,
            events: limits.events,
            log_bytes: limits.log_bytes,
            fuel: limits.fuel,
        }
    }
}

impl LimitsRecord {
    /// The limits to replay under: these, the rest at their defaults.
    pub fn limits(&self) -> orkestra_katalog::component::Limits {
        orkestra_katalog::component::Limits {
            timeout: std::time::Duration::from_millis(self.timeout_ms),
            memory: self.memory,
            result_size: self.result_size,
            kube_calls: self.kube_calls,
            kube_bytes: self.kube_bytes,
            children: self.children,
            events: self.events,
            log_bytes: self.log_bytes,
            fuel: self.fuel,
            ..Default::default()
        }
    }
}

/// Which export ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookName {
    Reconcile,
    Delete,
    NotFound,
}

impl From<Hook> for HookName {
    fn from(hook: Hook) -> Self {
        match hook {
            Hook::Reconcile => HookName::Reconcile,
            Hook::Delete => HookName::Delete,
            Hook::NotFound => HookName::NotFound,
        }
    }
}

impl From<HookName> for Hook {
    fn from(hook: HookName) -> Self {
        match hook {
            HookName::Reconcile => Hook::Reconcile,
            HookName::Delete => Hook::Delete,
            HookName::NotFound => Hook::NotFound,
        }
    }
}

/// The call's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRecord {
    pub key: String,
    pub api_version: String,
    pub kind: String,
    pub target: Option<String>,
    pub object: Option<Value>,
    pub event_id: Option<u64>,
    pub sentinels: Vec<String>,
    pub context: Value,
}

impl From<&Request> for RequestRecord {
    fn from(request: &Request) -> Self {
        let gvk = &request.gvk;
        Self {
            key: request.key.clone(),
            api_version: match gvk.group.is_empty() {
                true => gvk.version.clone(),
                false => format!("{}/{}", gvk.group, gvk.version),
            },
            kind: gvk.kind.clone(),
            target: request.target.clone(),
            object: request.object.as_deref().map(value_of),
            event_id: request.event_id,
            sentinels: request.sentinels.clone(),
            context: value_of(&request.context),
        }
    }
}

impl RequestRecord {
    /// The request as the guest receives it.
    pub fn request(&self) -> Request {
        let (group, version) = self.api_version.rsplit_once('/').unwrap_or(("", &self.api_version));
        Request {
            key: self.key.clone(),
            gvk: Gvk {
                group: group.into(),
                version: version.into(),
                kind: self.kind.clone(),
            },
            target: self.target.clone(),
            object: self.object.as_ref().map(text_of),
            event_id: self.event_id,
            sentinels: self.sentinels.clone(),
            context: text_of(&self.context),
        }
    }

    /// The custom resource's namespace, from its key.
    pub fn namespace(&self) -> Option<&str> {
        self.key.split_once('/').map(|(ns, _)| ns)
    }
}

/// A kube call and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    pub call: KubeCall,
    pub answer: KubeAnswer,
}

/// The clocks and random values the guest was served, in the order it read them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasiReads {
    /// `wasi:clocks/wall-clock.now`, nanoseconds since the epoch.
    pub wall: Vec<u64>,
    /// `wasi:clocks/monotonic-clock.now`, nanoseconds.
    pub monotonic: Vec<u64>,
    /// Bytes of `wasi:random/random`, base64.
    #[serde(with = "base64_bytes")]
    pub random: Vec<u8>,
    /// Bytes of `wasi:random/insecure`, base64.
    #[serde(with = "base64_bytes")]
    pub insecure_random: Vec<u8>,
    /// `wasi:random/insecure-seed`, as decimal text (a u128).
    pub insecure_seed: String,
}

mod base64_bytes {
    use base64::Engine as _;

    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// How the call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CallResult {
    Response(ResponseRecord),
    /// The world has no export for the hook (a constructor's not-found).
    NoExport,
    /// The call failed in the host's eyes (a trap, a limit, a denial): the reason.
    Failed(String),
}

impl CallResult {
    pub fn of(result: &Result<Option<Response>, CallError>) -> Self {
        match result {
            Ok(Some(response)) => CallResult::Response(response.into()),
            Ok(None) => CallResult::NoExport,
            Err(error) => CallResult::Failed(error.to_string()),
        }
    }
}

/// What the guest returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseRecord {
    pub outcome: OutcomeRecord,
    pub resources: Vec<Value>,
    pub status: Option<Value>,
    pub events: Vec<EventRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OutcomeRecord {
    Ok,
    RequeueAfterMs(u64),
    Error { reason: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventRecord {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl From<&Response> for ResponseRecord {
    fn from(response: &Response) -> Self {
        Self {
            outcome: match &response.outcome {
                Outcome::Ok => OutcomeRecord::Ok,
                Outcome::RequeueAfter(ms) => OutcomeRecord::RequeueAfterMs(*ms),
                Outcome::Error(Failure { reason, message }) => OutcomeRecord::Error {
                    reason: reason.clone(),
                    message: message.clone(),
                },
            },
            resources: response.resources.iter().map(|r| value_of(r)).collect(),
            status: response.status.as_deref().map(value_of),
            events: response.events.iter().map(EventRecord::from).collect(),
        }
    }
}

impl From<&Event> for EventRecord {
    fn from(event: &Event) -> Self {
        Self {
            type_: match event.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
            reason: event.reason.clone(),
            message: event.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::bindings::kube::KubeError;
    use super::super::super::capability::kube::exchange::Named;
    use super::*;

    #[test]
    fn a_request_and_an_answer_survive_the_round_trip_through_a_recording() {
        let request = Request {
            key: "team-a/blog".into(),
            gvk: Gvk {
                group: "hooks.orkestra.io".into(),
                version: "v1".into(),
                kind: "Site".into(),
            },
            target: Some("canary".into()),
            object: Some(r#"{"spec":{"title":"x"}}"#.into()),
            event_id: Some(7),
            sentinels: vec!["create".into()],
            context: r#"{"args":{"a":1}}"#.into(),
        };
        let record = RequestRecord::from(&request);
        assert_eq!(record.api_version, "hooks.orkestra.io/v1");
        assert_eq!(record.namespace(), Some("team-a"));
        let back = record.request();
        assert_eq!(back.gvk.group, "hooks.orkestra.io");
        assert_eq!(back.object, request.object);
        assert_eq!(back.context, request.context);
        let core = RequestRecord {
            api_version: "v1".into(),
            ..record
        };
        assert_eq!(core.request().gvk.group, "");

        let listed = KubeAnswer::of_list(&Ok(vec![r#"{"a":1}"#.into(), r#"{"b":2}"#.into()]));
        assert_eq!(listed.list().unwrap(), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
        let gone = KubeAnswer::of_object(&Err(KubeError::NotFound));
        assert!(matches!(gone.object(), Err(KubeError::NotFound)));
        let text = serde_json::to_string(&Exchange {
            call: KubeCall::Get {
                object: Named {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some("a".into()),
                    name: "x".into(),
                },
            },
            answer: KubeAnswer::Forbidden("no".into()),
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"call":{"verb":"get","apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"x"},"answer":{"forbidden":"no"}}"#
        );
    }
}
