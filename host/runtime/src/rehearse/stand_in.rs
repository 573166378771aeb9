//! An API server in memory, for `ork simulate`: the objects it is given (the CR, what the
//! reconcile reads) and what the reconcile writes, answered the way kube-apiserver answers
//! the requests the runtime makes (get, list with a label selector, create, replace, merge
//! and apply patches, the status subresource, delete, discovery of the kinds it knows). No
//! admission, no defaulting, no garbage collection, no watch: a rehearsal of the reconcile's
//! own logic, not of the cluster's. Every write is recorded like a dry run's.

use crate::error::Error;
use std::collections::BTreeMap;
use std::sync::Arc;

use http::{Method, StatusCode};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::ApiPath;
use super::dry_run::{Write, Writes};

/// A kind the stand-in serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Kind {
    fn new(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// The URL path of its objects: `/api/v1` or `/apis/GROUP/VERSION`.
    fn prefix(&self) -> String {
        match self.api_version.contains('/') {
            true => format!("/apis/{}", self.api_version),
            false => format!("/api/{}", self.api_version),
        }
    }
}

/// The built-in kinds, from the Katalog's one table of them.
pub fn built_in_kinds() -> Vec<Kind> {
    orkestra_katalog::kinds::built_in()
        .map(|(api_version, kind, plural, namespaced)| Kind::new(api_version, kind, plural, namespaced))
        .collect()
}

/// What the stand-in holds.
#[derive(Debug)]
pub struct Cluster {
    kinds: Vec<Kind>,
    /// Objects by URL path.
    objects: Mutex<BTreeMap<String, Value>>,
    /// The last resourceVersion handed out.
    version: Mutex<u64>,
    writes: Arc<Writes>,
}

/// A request as the stand-in reads its path.
struct Target<'k> {
    kind: &'k Kind,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

impl Cluster {
    /// A stand-in serving `kinds`, holding no object yet.
    pub fn new(kinds: Vec<Kind>) -> Arc<Self> {
        Arc::new(Self {
            kinds,
            objects: Mutex::default(),
            version: Mutex::new(0),
            writes: Arc::default(),
        })
    }

    /// Writes recorded since the last take.
    pub fn writes(&self) -> &Arc<Writes> {
        &self.writes
    }

    /// The kind of `api_version` `kind`, if served.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.api_version == api_version && k.kind == kind)
    }

    /// Puts `object` in place as if it had been created (no write recorded). Errors name what
    /// it lacks.
    pub fn put(&self, object: Value) -> Result<Value, Error> {
        let (api_version, kind, name) = (
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        );
        if api_version.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(Error::Simulation(
                "an object needs apiVersion, kind and metadata.name".into(),
            ));
        }
        let served = self
            .kind(api_version, kind)
            .ok_or_else(|| Error::Simulation(format!("{api_version} {kind} is not a kind this simulation knows")))?;
        let namespace = object["metadata"]["namespace"].as_str().filter(|_| served.namespaced);
        if served.namespaced && namespace.is_none() {
            return Err(Error::Simulation(format!("{kind} {name} needs metadata.namespace")));
        }
        let path = object_path(served, namespace, name);
        let stamped = self.stamp(object);
        self.lock().insert(path, stamped.clone());
        Ok(stamped)
    }

    /// The object at `path`, as it is now.
    pub fn get(&self, path: &str) -> Option<Value> {
        self.lock().get(path).cloned()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, BTreeMap<String, Value>> {
        self.objects.lock()
    }

    /// `object` with what the API server sets on a write: a uid once, a new resourceVersion.
    fn stamp(&self, mut object: Value) -> Value {
        let mut version = self.version.lock();
        *version += 1;
        let metadata = &mut object["metadata"];
        if metadata["uid"].as_str().is_none_or(str::is_empty) {
            metadata["uid"] = json!(format!("00000000-0000-4000-8000-{:012}", *version));
        }
        if metadata["generation"].is_null() {
            metadata["generation"] = json!(1);
        }
        if metadata["creationTimestamp"].is_null() {
            metadata["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        metadata["resourceVersion"] = json!(version.to_string());
        object
    }

    fn target(&self, path: &str) -> Option<Result<Target<'_>, Value>> {
        let Some(parts) = ApiPath::parse(path) else {
            return Some(Err(failure(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("no such path {path}"),
            )));
        };
        let plural = parts.resource?;
        let api_version = parts.api_version;
        let Some(kind) = self
            .kinds
            .iter()
            .find(|k| k.api_version == api_version && k.plural == plural)
        else {
            let message = format!("the server could not find the requested resource ({api_version} {plural})");
            return Some(Err(failure(StatusCode::NOT_FOUND, "NotFound", &message)));
        };
        Some(Ok(Target {
            kind,
            namespace: parts.namespace.map(String::from),
            name: parts.name.map(String::from),
            status: parts.subresource == Some("status"),
        }))
    }

    /// Answers one request: the status and the body.
    fn answer(&self, method: &Method, uri: &http::Uri, body: Option<Value>) -> (StatusCode, Value) {
        let path = uri.path();
        let target = match self.target(path) {
            None => return (StatusCode::OK, self.discovery(path)),
            Some(Err(failed)) => return (status_of(&failed), failed),
            Some(Ok(target)) => target,
        };
        let Target {
            kind,
            namespace,
            name,
            status,
        } = target;
        let namespace = namespace.as_deref();
        match (method, name) {
            (&Method::GET, None) => (StatusCode::OK, self.list(kind, namespace, uri.query())),
            (&Method::GET, Some(name)) => match self.get(&object_path(kind, namespace, &name)) {
                Some(object) => (StatusCode::OK, object),
                None => not_found(kind, &name),
            },
            (&Method::POST, None) => {
                let mut object = body.unwrap_or(Value::Null);
                if let Some(invalid) = invalid_name(kind, &object) {
                    return invalid;
                }
                if let Some(namespace) = namespace {
                    object["metadata"]["namespace"] = json!(namespace);
                }
                if object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
                    let base = object["metadata"]["generateName"]
                        .as_str()
                        .unwrap_or("object-")
                        .to_string();
                    let count = self.lock().len();
                    object["metadata"]["name"] = json!(format!("{base}{count:05}"));
                }
                let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let path = object_path(kind, namespace, &name);
                if self.get(&path).is_some() {
                    let message = format!("{} \"{name}\" already exists", kind.plural);
                    return (
                        StatusCode::CONFLICT,
                        failure(StatusCode::CONFLICT, "AlreadyExists", &message),
                    );
                }
                let stamped = self.stamp(object);
                self.lock().insert(path, stamped.clone());
                (StatusCode::CREATED, stamped)
            }
            (&Method::PUT, Some(name)) | (&Method::PATCH, Some(name)) => {
                let path = object_path(kind, namespace, &name);
                let existing = self.get(&path);
                let apply = method == Method::PATCH && uri.query().is_some_and(|q| q.contains("fieldManager"));
                let Some(given) = body else {
                    return (
                        StatusCode::BAD_REQUEST,
                        failure(StatusCode::BAD_REQUEST, "BadRequest", "no body"),
                    );
                };
                if !status && let Some(invalid) = invalid_name(kind, &given) {
                    return invalid;
                }
                let merged = match (existing, method == Method::PUT, status) {
                    (None, _, true) | (None, false, false) if !apply => return not_found(kind, &name),
                    (None, _, _) => given,
                    (Some(_), true, false) => given,
                    (Some(mut existing), _, true) => {
                        merge(&mut existing["status"], given["status"].clone());
                        existing
                    }
                    (Some(mut existing), _, false) => {
                        let mut given = given;
                        // The object's status is written through its own path.
                        if let Some(map) = given.as_object_mut() {
                            map.remove("status");
                        }
                        merge(&mut existing, given);
                        existing
                    }
                };
                let stamped = self.stamp(merged);
                self.lock().insert(path, stamped.clone());
                (StatusCode::OK, stamped)
            }
            (&Method::DELETE, Some(name)) => match self.lock().remove(&object_path(kind, namespace, &name)) {
                Some(object) => (StatusCode::OK, object),
                None => not_found(kind, &name),
            },
            (method, _) => {
                let message = format!("{method} is not served here for {}", kind.plural);
                (
                    StatusCode::METHOD_NOT_ALLOWED,
                    failure(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", &message),
                )
            }
        }
    }

    /// The objects of `kind` (in `namespace`, or all), those the query's labelSelector picks.
    fn list(&self, kind: &Kind, namespace: Option<&str>, query: Option<&str>) -> Value {
        let selector: Vec<(String, Option<String>)> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .filter(|(key, _)| key == "labelSelector")
            .flat_map(|(_, decoded)| {
                decoded
                    .split(',')
                    .filter(|t| !t.is_empty())
                    .map(|term| match term.split_once('=') {
                        Some((k, v)) => (k.to_string(), Some(v.trim_start_matches('=').to_string())),
                        None => (term.to_string(), None),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let items: Vec<Value> = self
            .lock()
            .values()
            .filter(|o| o["apiVersion"] == kind.api_version.as_str() && o["kind"] == kind.kind.as_str())
            .filter(|o| namespace.is_none_or(|n| o["metadata"]["namespace"] == n))
            .filter(|o| {
                selector.iter().all(|(key, value)| {
                    let label = &o["metadata"]["labels"][key];
                    match value {
                        Some(value) => label == value.as_str(),
                        None => label.is_string(),
                    }
                })
            })
            .cloned()
            .collect();
        let version = *self.version.lock();
        json!({"apiVersion": kind.api_version, "kind": format!("{}List", kind.kind),
               "metadata": {"resourceVersion": version.to_string()}, "items": items})
    }

    /// `APIResourceList` of a group version: the kinds it serves, with their status.
    fn discovery(&self, path: &str) -> Value {
        let group_version = path
            .trim_matches('/')
            .strip_prefix("apis/")
            .or_else(|| path.trim_matches('/').strip_prefix("api/"))
            .unwrap_or_default();
        let resources: Vec<Value> = self
            .kinds
            .iter()
            .filter(|k| k.api_version == group_version)
            .flat_map(|k| {
                let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
                let object = json!({"name": k.plural, "singularName": k.kind.to_lowercase(),
                    "namespaced": k.namespaced, "kind": k.kind, "verbs": verbs});
                let status = json!({"name": format!("{}/status", k.plural), "singularName": "",
                    "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]});
                [object, status]
            })
            .collect();
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    }
}

fn object_path(kind: &Kind, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{}/namespaces/{namespace}/{}/{name}", kind.prefix(), kind.plural),
        None => format!("{}/{}/{name}", kind.prefix(), kind.plural),
    }
}

/// RFC 7386: `patch` merged into `target` (null removes).
fn merge(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let Some(map) = target.as_object_mut() else { return };
            for (key, value) in patch {
                match value {
                    Value::Null => {
                        map.remove(&key);
                    }
                    value => merge(map.entry(key).or_insert(Value::Null), value),
                }
            }
        }
        other => *target = other,
    }
}

/// The API server's answer to an object whose name it would refuse (a DNS-1123 subdomain
/// is what every kind the runtime writes takes), or none.
fn invalid_name(kind: &Kind, object: &Value) -> Option<(StatusCode, Value)> {
    let name = object["metadata"]["name"].as_str()?;
    if orkestra_expr::names::is_dns1123_subdomain(name) {
        return None;
    }
    let message = format!(
        "{} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        kind.kind
    );
    let code = StatusCode::UNPROCESSABLE_ENTITY;
    Some((code, failure(code, "Invalid", &message)))
}

fn failure(code: StatusCode, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code.as_u16()})
}

fn status_of(failure: &Value) -> StatusCode {
    failure["code"]
        .as_u64()
        .and_then(|c| StatusCode::from_u16(c as u16).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn not_found(kind: &Kind, name: &str) -> (StatusCode, Value) {
    let message = format!("{} \"{name}\" not found", kind.plural);
    (
        StatusCode::NOT_FOUND,
        failure(StatusCode::NOT_FOUND, "NotFound", &message),
    )
}

/// A client of `cluster`: every request answered from memory, every write recorded.
pub fn client(cluster: Arc<Cluster>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let cluster = cluster.clone();
        async move {
            let (parts, body) = request.into_parts();
            let sent = body.collect_bytes().await?;
            let body: Option<Value> = serde_json::from_slice(&sent).ok();
            let (status, answer) = cluster.answer(&parts.method, &parts.uri, body.clone());
            if !matches!(parts.method, Method::GET | Method::HEAD) {
                cluster.writes.push(Write {
                    method: parts.method.clone(),
                    path: parts.uri.path().to_string(),
                    body,
                    status: status.as_u16(),
                    answer: Some(answer.clone()),
                });
            }
            let bytes = serde_json::to_vec(&answer).map_err(kube::Error::SerdeError)?;
            http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(bytes))
                .map_err(kube::Error::HttpError)
        }
    });
    kube::Client::new(service, "default")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_answer_like_the_api_server_for_get_list_patch_status_and_delete() {
        let cluster = Cluster::new(built_in_kinds());
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web"}}, "data": {"x": "1"}});
        cluster.put(cm).unwrap();
        let uri = |text: &str| text.parse::<http::Uri>().unwrap();
        let (code, got) = cluster.answer(&Method::GET, &uri("/api/v1/namespaces/ns/configmaps/a"), None);
        assert_eq!((code, &got["data"]["x"]), (StatusCode::OK, &json!("1")));
        assert!(got["metadata"]["uid"].is_string());
        let (_, listed) = cluster.answer(
            &Method::GET,
            &uri("/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dweb"),
            None,
        );
        assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
        let (_, none) = cluster.answer(&Method::GET, &uri("/api/v1/configmaps?labelSelector=app%3Ddb"), None);
        assert_eq!(none["items"], json!([]));
        let patch = json!({"data": {"x": "2", "y": "3"}});
        let (code, patched) = cluster.answer(&Method::PATCH, &uri("/api/v1/namespaces/ns/configmaps/a"), Some(patch));
        assert_eq!((code, &patched["data"]), (StatusCode::OK, &json!({"x": "2", "y": "3"})));
        let (code, missing) = cluster.answer(
            &Method::PATCH,
            &uri("/api/v1/namespaces/ns/configmaps/b"),
            Some(json!({})),
        );
        assert_eq!((code, &missing["reason"]), (StatusCode::NOT_FOUND, &json!("NotFound")));
        let applied = cluster.answer(
            &Method::PATCH,
            &uri("/api/v1/namespaces/ns/configmaps/b?fieldManager=ork&force=true"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "ns"}})),
        );
        assert_eq!(applied.0, StatusCode::OK, "an apply creates");
        let (code, _) = cluster.answer(&Method::DELETE, &uri("/api/v1/namespaces/ns/configmaps/a"), None);
        assert_eq!(code, StatusCode::OK);
        assert!(cluster.get("/api/v1/namespaces/ns/configmaps/a").is_none());
        let (_, discovery) = cluster.answer(&Method::GET, &uri("/apis/apps/v1"), None);
        assert!(
            discovery["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["kind"] == "Deployment")
        );
        let (code, _) = cluster.answer(&Method::GET, &uri("/apis/nosuch.io/v1/things/x"), None);
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(cluster.put(json!({"kind": "ConfigMap"})).is_err());
        let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Name"}});
        let (code, refused) = cluster.answer(&Method::POST, &uri("/api/v1/namespaces/ns/configmaps"), Some(bad));
        assert_eq!(
            (code, &refused["reason"]),
            (StatusCode::UNPROCESSABLE_ENTITY, &json!("Invalid"))
        );
    }
}
