//! Secrets out of a recording. A recording holds what the component could read, and a
//! component reads Secrets in many shapes: a `get` answers one, a `list` answers items that
//! come without their `kind`, the request's context carries Secret children, and the guest
//! may copy a value into a status, a child or a log line. So redaction is done twice over:
//! every Secret object wherever it sits (known by its `kind`, or by the call that read it)
//! has its values replaced, and every value any of them held is then scrubbed from every
//! string of the recording, the logs and the result included.

use base64::Engine as _;
use serde_json::Value;

use super::recording::{CallResult, KubeAnswer, KubeCall, Recording, ResponseRecord};

/// What replaces each value of a Secret's `data` and `stringData` in a recording.
pub const REDACTED: &str = "<redacted>";

/// Values shorter than this are replaced only where a whole string is the value (a short
/// value would match inside unrelated text).
const SCRUB_WITHIN: usize = 4;

/// The values a redaction found, as they may reappear: the base64 of `data` and its decoded
/// text, and `stringData`.
#[derive(Default)]
struct Found {
    values: Vec<(String, &'static str)>,
}

impl Found {
    fn add(&mut self, value: &str, placeholder: &'static str) {
        if !value.is_empty() && value != placeholder && !self.values.iter().any(|(v, _)| v == value) {
            self.values.push((value.to_string(), placeholder));
        }
    }

    /// Every string of `value` with the found values replaced.
    fn scrub(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.scrub_text(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub(item)),
            Value::Object(object) => object.values_mut().for_each(|item| self.scrub(item)),
            _ => {}
        }
    }

    fn scrub_text(&self, text: &mut String) {
        for (secret, placeholder) in &self.values {
            if secret.len() < SCRUB_WITHIN {
                if text == secret {
                    *text = (*placeholder).to_string();
                }
            } else if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), placeholder);
            }
        }
    }
}

fn base64_placeholder() -> &'static str {
    static PLACEHOLDER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PLACEHOLDER.get_or_init(|| base64::engine::general_purpose::STANDARD.encode(REDACTED))
}

/// Replaces the values a Secret object holds (its data, string data and the last-applied copy
/// kubectl keeps of them), noting each in `found`.
fn redact_secret(object: &mut serde_json::Map<String, Value>, found: &mut Found) {
    let encoded = base64_placeholder();
    if let Some(Value::Object(entries)) = object.get_mut("data") {
        for entry in entries.values_mut() {
            if let Value::String(text) = entry {
                found.add(text, encoded);
                let decoded = base64::engine::general_purpose::STANDARD.decode(text.as_bytes());
                if let Ok(plain) = decoded.map(String::from_utf8)
                    && let Ok(plain) = plain
                {
                    found.add(&plain, REDACTED);
                }
            }
            *entry = Value::String(encoded.into());
        }
    }
    if let Some(Value::Object(entries)) = object.get_mut("stringData") {
        for entry in entries.values_mut() {
            if let Value::String(text) = entry {
                found.add(text, REDACTED);
            }
            *entry = Value::String(REDACTED.into());
        }
    }
    if let Some(Value::Object(annotations)) = object.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Redacts every Secret object in `value`, at any depth (known by `kind: Secret`).
fn redact_nested(value: &mut Value, found: &mut Found) -> bool {
    match value {
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, item| redact_nested(item, found) | any),
        Value::Object(object) if object.get("kind").and_then(Value::as_str) == Some("Secret") => {
            redact_secret(object, found);
            true
        }
        Value::Object(object) => object
            .values_mut()
            .fold(false, |any, item| redact_nested(item, found) | any),
        _ => false,
    }
}

/// Redacts every object of `value` (an answer about Secrets: one object, or a list's items,
/// which come without their kind).
fn redact_all(value: &mut Value, found: &mut Found) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|item| redact_all(item, found)),
        Value::Object(object) => redact_secret(object, found),
        _ => {}
    }
}

/// Replaces the values of every Secret in `value` (at any depth); says whether there was one.
pub fn redact_secrets(value: &mut Value) -> bool {
    redact_nested(value, &mut Found::default())
}

/// Whether a kube call reads or writes Secrets.
fn about_secrets(call: &KubeCall) -> bool {
    let (api_version, kind) = match call {
        KubeCall::Get { object } | KubeCall::Delete { object } | KubeCall::PatchStatus { object, .. } => {
            (object.api_version.as_str(), object.kind.as_str())
        }
        KubeCall::List { api_version, kind, .. } => (api_version.as_str(), kind.as_str()),
        KubeCall::Apply { object } => (
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
        ),
    };
    api_version == "v1" && kind == "Secret"
}

impl Recording {
    /// Every Secret in what the call was given, read, sent and returned, redacted, and every
    /// value one held scrubbed from the rest (logs included).
    pub fn redact(&mut self) {
        let mut found = Found::default();
        if let Some(object) = &mut self.request.object {
            redact_nested(object, &mut found);
        }
        redact_nested(&mut self.request.context, &mut found);
        for exchange in &mut self.kube {
            let secrets = about_secrets(&exchange.call);
            if let KubeCall::Apply { object } = &mut exchange.call {
                redact_nested(object, &mut found);
            }
            if let KubeCall::PatchStatus { status, .. } = &mut exchange.call {
                redact_nested(status, &mut found);
            }
            if let KubeAnswer::Ok(value) = &mut exchange.answer {
                match secrets {
                    true => redact_all(value, &mut found),
                    false => {
                        redact_nested(value, &mut found);
                    }
                }
            }
        }
        if let CallResult::Response(response) = &mut self.result {
            for resource in &mut response.resources {
                redact_nested(resource, &mut found);
            }
        }
        // The values again, wherever the guest may have copied them.
        if let Some(object) = &mut self.request.object {
            found.scrub(object);
        }
        found.scrub(&mut self.request.context);
        for exchange in &mut self.kube {
            match &mut exchange.call {
                KubeCall::Apply { object } => found.scrub(object),
                KubeCall::PatchStatus { status, .. } => found.scrub(status),
                _ => {}
            }
            if let KubeAnswer::Ok(value) = &mut exchange.answer {
                found.scrub(value);
            }
        }
        for line in &mut self.logs {
            found.scrub_text(line);
        }
        match &mut self.result {
            CallResult::Response(response) => {
                for resource in &mut response.resources {
                    found.scrub(resource);
                }
                if let Some(status) = &mut response.status {
                    found.scrub(status);
                }
                for event in &mut response.events {
                    found.scrub_text(&mut event.message);
                }
                if let super::recording::OutcomeRecord::Error { message, .. } = &mut response.outcome {
                    found.scrub_text(message);
                }
            }
            CallResult::Failed(why) => found.scrub_text(why),
            CallResult::NoExport => {}
        }
        self.secrets_redacted = true;
    }
}

impl ResponseRecord {
    /// Its Secret children redacted, as a recording keeps them.
    pub fn redact(&mut self) {
        for resource in &mut self.resources {
            redact_secrets(resource);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::capability::kube::exchange::Named;
    use super::super::recording::{
        Exchange, HookName, LimitsRecord, OutcomeRecord, Recorded, RequestRecord, WasiReads,
    };
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_keeps_its_keys_and_loses_its_values_wherever_it_appears() {
        let secret = || {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}",
                "team": "a"}},
                "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}})
        };
        let mut one = secret();
        assert!(redact_secrets(&mut one));
        assert_eq!(
            one["data"]["password"],
            base64::engine::general_purpose::STANDARD.encode(REDACTED)
        );
        assert_eq!(one["stringData"]["user"], REDACTED);
        assert_eq!(one["metadata"]["annotations"], json!({"team": "a"}));
        let mut list = json!([{"kind": "ConfigMap", "data": {"a": "b"}}, {"children": {"db": secret()}}]);
        assert!(redact_secrets(&mut list), "nested at any depth");
        assert_eq!(list[0]["data"]["a"], "b", "other kinds are kept");
        assert!(!list.to_string().contains("aHVudGVyMg=="));
        let mut config = json!({"kind": "ConfigMap", "data": {"a": "b"}});
        assert!(!redact_secrets(&mut config));
    }

    fn named(kind: &str, name: &str) -> Named {
        Named {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some("team-b".into()),
            name: name.into(),
        }
    }

    #[test]
    fn a_recording_loses_every_secret_value_the_call_saw_wherever_the_guest_put_it() {
        // hunter2-password, in base64.
        let b64 = "aHVudGVyMi1wYXNzd29yZA==";
        let plain = "hunter2-password";
        let item = json!({"metadata": {"name": "db"}, "data": {"password": b64}});
        let mut recording = Recording {
            format: super::super::FORMAT,
            at: "2026-12-06T00:00:00Z".into(),
            component: Recorded {
                slot: "site".into(),
                world: "hook".into(),
                source: "x.wasm".into(),
                digest: "d".into(),
                revision: 1,
                limits: LimitsRecord::from(&orkestra_katalog::component::Limits::default()),
            },
            hook: HookName::Reconcile,
            request: RequestRecord {
                key: "team-a/blog".into(),
                api_version: "example.com/v1".into(),
                kind: "Site".into(),
                target: None,
                object: Some(json!({"spec": {"title": "t"}})),
                event_id: None,
                sentinels: Vec::new(),
                context: json!({"children": {"creds": {"apiVersion": "v1", "kind": "Secret",
                    "data": {"token": "c2VjcmV0LXRva2VuLTEyMw=="}}}}),
            },
            kube: vec![
                // A list's items come without their kind.
                Exchange {
                    call: KubeCall::List {
                        api_version: "v1".into(),
                        kind: "Secret".into(),
                        namespace: Some("team-b".into()),
                        label_selector: None,
                    },
                    answer: KubeAnswer::Ok(json!([item])),
                },
                Exchange {
                    call: KubeCall::Get {
                        object: named("ConfigMap", "echo"),
                    },
                    answer: KubeAnswer::Ok(json!({"kind": "ConfigMap", "data": {"copy": plain}})),
                },
            ],
            wasi: WasiReads::default(),
            logs: vec![format!("the password is {plain}"), "secret-token-123 leaked".into()],
            result: CallResult::Response(ResponseRecord {
                outcome: OutcomeRecord::Ok,
                resources: vec![json!({"kind": "ConfigMap", "data": {"copied": b64}})],
                status: Some(json!({"seen": format!("prefix-{plain}")})),
                events: Vec::new(),
            }),
            secrets_redacted: false,
        };
        recording.redact();
        let text = serde_json::to_string(&recording).unwrap();
        for leaked in [b64, plain, "c2VjcmV0LXRva2VuLTEyMw==", "secret-token-123"] {
            assert!(!text.contains(leaked), "{leaked} is still in {text}");
        }
        assert!(recording.secrets_redacted);
        assert_eq!(recording.logs[0], "the password is <redacted>");
        let CallResult::Response(response) = &recording.result else {
            panic!("a response")
        };
        assert_eq!(response.status.as_ref().unwrap()["seen"], "prefix-<redacted>");
        assert_eq!(response.resources[0]["data"]["copied"], base64_placeholder());
    }
}
