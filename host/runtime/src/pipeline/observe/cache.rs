//! The store of what a watch has seen.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

/// The objects a watch has seen (the primary CRs, or one owned kind's children), by key.
///
/// Each is kept as its JSON text and parsed again on each read: a parsed tree of a small
/// object takes about eight times its text (a 635-byte CR is 5 KB as a `serde_json::Value`,
/// a 474-byte ConfigMap 3.7 KB), and most cached objects sit unread between their changes.
/// Reading one costs a parse of a few microseconds per kilobyte, outside the lock: a watch's
/// writes never wait for a reader's parse.
///
/// The runtime's own writes are read back at once ([`Cache::advance`]): a reconcile that
/// follows one (a resync, a child's event, a retry) reads what was written, not the version
/// before it, and so does not write it again.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    objects: Arc<RwLock<HashMap<String, Entry>>>,
    /// Complete lists the watch made: the first, and one per relist (an expired
    /// resourceVersion, a restarted API server).
    lists: Arc<std::sync::atomic::AtomicU64>,
    /// The first list has been stored whole: from then on, what is not here was not there.
    /// A watch channel, so a start-up step can wait for it.
    listed: Arc<tokio::sync::watch::Sender<bool>>,
}

/// One cached object.
#[derive(Debug)]
struct Entry {
    /// Shared, so a reader takes it out of the lock and parses it there.
    text: Arc<str>,
    /// The value of its owner-UID label: what every scan for a CR's children asks, answered
    /// without a parse.
    owner: Option<Box<str>>,
    /// The runtime's own write of it, answered but not yet brought by the watch; boxed, as
    /// almost every entry holds none.
    ahead: Option<Box<Ahead>>,
}

/// A version the runtime wrote, later than the watch's.
#[derive(Debug)]
struct Ahead {
    text: Arc<str>,
    version: u64,
}

impl Entry {
    fn new(object: &Value) -> Self {
        Self {
            text: orkestra_wasm::json_text(object).into(),
            owner: object["metadata"]["labels"][orkestra_expr::labels::OWNER_UID_LABEL]
                .as_str()
                .map(Into::into),
            ahead: None,
        }
    }

    /// The text readers get: the runtime's own write until the watch brings it.
    fn current(&self) -> &Arc<str> {
        self.ahead.as_ref().map_or(&self.text, |ahead| &ahead.text)
    }

    fn value(&self) -> Option<Arc<Value>> {
        parsed(&self.text)
    }
}

/// A cached object's text parsed back: it is a serialized `Value`, so it parses (a failure
/// would be a bug, and reads as an object not seen).
fn parsed(text: &str) -> Option<Arc<Value>> {
    serde_json::from_str(text).ok().map(Arc::new)
}

/// An object's resourceVersion as a number. Since Kubernetes 1.35 (KEP-5504) resource
/// versions of one resource are decimal integers that order its writes; one of any other form
/// is `None` and orders nothing.
fn version(object: &Value) -> Option<u64> {
    let text = object["metadata"]["resourceVersion"].as_str()?;
    match text.bytes().all(|b| b.is_ascii_digit()) {
        true => text.parse().ok(),
        false => None,
    }
}

impl Cache {
    /// The first complete list is stored.
    pub fn listed(&self) {
        self.listed.send_replace(true);
    }

    /// Whether it holds a complete list yet.
    pub fn is_listed(&self) -> bool {
        *self.listed.borrow()
    }

    /// Returns once it holds a complete list.
    pub async fn until_listed(&self) {
        // The sender lives as long as this cache: the wait ends only by the list.
        let _ = self.listed.subscribe().wait_for(|listed| *listed).await;
    }

    /// A complete list began.
    pub fn listing(&self) {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Complete lists so far.
    pub fn lists(&self) -> u64 {
        self.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, HashMap<String, Entry>> {
        self.objects.read()
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.objects.write()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.get_with_text(key).map(|(object, _)| object)
    }

    /// The object and the text it was parsed from: what a component receives, serialized
    /// once per version (when the watch stored it), never per call.
    pub fn get_with_text(&self, key: &str) -> Option<(Arc<Value>, Arc<str>)> {
        let text = self.read().get(key)?.current().clone();
        Some((parsed(&text)?, text))
    }

    /// Stores the object; whether it replaced one (left unparsed).
    pub fn insert(&self, key: String, object: &Value) -> bool {
        self.store(key, object).is_some()
    }

    /// Stores the object, returning the previous version the watch brought.
    pub fn replace(&self, key: String, object: &Value) -> Option<Arc<Value>> {
        self.store(key, object)?.value()
    }

    /// Stores what the watch brought (or a fresh read). The runtime's own write stays what
    /// readers get while it is later: a watch event of an earlier version may come after
    /// the write's answer.
    fn store(&self, key: String, object: &Value) -> Option<Entry> {
        let mut entry = Entry::new(object);
        let mut objects = self.write();
        if let Some(old) = objects.get_mut(&key)
            && let Some(ahead) = old.ahead.take()
            && version(object).is_some_and(|stored| ahead.version > stored)
        {
            entry.ahead = Some(ahead);
        }
        objects.insert(key, entry)
    }

    /// What stores the answers to the runtime's writes of these objects (see
    /// [`OwnWrites::read_back_into`](super::own_writes::OwnWrites::read_back_into)), shaped
    /// as the watch that fills it shapes them (its `declared` sentinels).
    pub fn read_back(&self, declared: u16) -> impl Fn(&str, &kube::api::DynamicObject) + Send + Sync + 'static {
        let cache = self.clone();
        move |_, answer| cache.advance_to_answer(answer, declared)
    }

    /// [`Cache::advance`] to `answer`, the API server's answer to the runtime's write of one
    /// of these objects, shaped as the watch that fills this cache shapes it (its `declared`
    /// sentinels).
    pub fn advance_to_answer(&self, answer: &kube::api::DynamicObject, declared: u16) {
        if let Some((key, value)) = super::to_cached_json(answer.clone(), declared) {
            self.advance(&key, &value);
        }
    }

    /// `object` is the answer to the runtime's own write of `key`: reads get it from now on,
    /// until the watch brings it (or a later version). Kept only when it is later than the
    /// version held; an object the watch has not shown is left to the watch.
    pub fn advance(&self, key: &str, object: &Value) {
        let Some(written) = version(object) else { return };
        let text: Arc<str> = orkestra_wasm::json_text(object).into();
        let mut objects = self.write();
        let Some(entry) = objects.get_mut(key) else { return };
        let held = match &entry.ahead {
            Some(ahead) => Some(ahead.version),
            None => entry.value().as_deref().and_then(version),
        };
        if held.is_some_and(|held| written > held) {
            entry.ahead = Some(Box::new(Ahead { text, version: written }));
        }
    }

    pub fn remove(&self, key: &str) -> Option<Arc<Value>> {
        let old = self.write().remove(key);
        old?.value()
    }

    /// The object at `key`, if its text holds each of `pairs` (from [`pair_text`]): a scan
    /// for labels parses only the objects that may match (one that passes may still not: the
    /// pair may stand elsewhere in the object).
    pub fn get_holding(&self, key: &str, pairs: &[String]) -> Option<Arc<Value>> {
        let text = self.read().get(key)?.current().clone();
        match pairs.iter().all(|pair| text.contains(pair.as_str())) {
            true => parsed(&text),
            false => None,
        }
    }

    /// The objects whose owner-UID label is `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<Value>> {
        let owned: Vec<Arc<str>> = self
            .read()
            .values()
            .filter(|entry| entry.owner.as_deref() == Some(uid))
            .map(|entry| entry.current().clone())
            .collect();
        owned.iter().filter_map(|text| parsed(text)).collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::pipeline::observe::pair_text;

    pub(in crate::pipeline::observe) fn child(name: &str, owner: Option<&str>) -> Value {
        let mut child = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}}, "data": {"k": "v"}});
        if let Some(owner) = owner {
            child["metadata"]["labels"][orkestra_expr::labels::OWNER_UID_LABEL] = owner.into();
        }
        child
    }

    #[test]
    fn a_cached_object_reads_back_as_stored_and_a_replacement_returns_the_previous() {
        let cache = Cache::default();
        let first = child("a", Some("u1"));
        assert!(cache.replace("ns/a".into(), &first).is_none());
        assert_eq!(cache.get("ns/a").as_deref(), Some(&first));
        let mut second = first.clone();
        second["data"]["k"] = "w".into();
        assert_eq!(cache.replace("ns/a".into(), &second).as_deref(), Some(&first));
        assert_eq!(cache.get("ns/a").as_deref(), Some(&second));
        assert_eq!(cache.remove("ns/a").as_deref(), Some(&second));
        assert!(cache.get("ns/a").is_none() && cache.is_empty());
        assert!(!cache.insert("ns/b".into(), &first), "nothing was there");
        assert!(cache.insert("ns/b".into(), &second), "it replaced the first");
        assert_eq!(cache.get("ns/b").as_deref(), Some(&second));
        cache.remove("ns/b");
        // Numbers come back as they went in, floats to the last bit: a changed-spec sentinel
        // compares a parsed old version with a new one never serialized.
        let numbers =
            serde_json::json!({"spec": {"f": 0.1 + 0.2, "e": 2.225_073_858_507_201e-308, "i": u64::MAX, "n": -7}});
        cache.insert("ns/n".into(), &numbers);
        assert_eq!(cache.get("ns/n").as_deref(), Some(&numbers));
    }

    #[test]
    fn the_runtime_s_own_write_is_read_at_once_until_the_watch_catches_up() {
        let cache = Cache::default();
        let at = |version: &str, x: &str| serde_json::json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": version}, "spec": {"x": x}});
        let x = |key: &str| cache.get(key).map(|object| object["spec"]["x"].clone());
        cache.insert("ns/a".into(), &at("10", "read"));
        cache.advance("ns/a", &at("12", "written"));
        assert_eq!(x("ns/a"), Some("written".into()));
        let (object, text) = cache.get_with_text("ns/a").unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            *object,
            "the text is the write's"
        );
        // An earlier version the watch brings after the answer: the watch's previous version
        // is what a replacement returns (sentinels compare those), readers keep the write.
        let previous = cache.replace("ns/a".into(), &at("11", "between")).unwrap();
        assert_eq!(previous["spec"]["x"], "read");
        assert_eq!(x("ns/a"), Some("written".into()));
        cache.advance("ns/a", &at("11", "an earlier answer"));
        assert_eq!(x("ns/a"), Some("written".into()), "never back to an earlier version");
        // The echo, then a later change: the watch's from then on.
        cache.replace("ns/a".into(), &at("12", "written"));
        cache.insert("ns/a".into(), &at("13", "theirs"));
        assert_eq!(x("ns/a"), Some("theirs".into()));
        cache.advance("ns/a", &at("x14", "not a number"));
        assert_eq!(
            x("ns/a"),
            Some("theirs".into()),
            "a version of another form orders nothing"
        );
        // Not shown by the watch (or deleted meanwhile): left to the watch.
        cache.advance("ns/b", &at("20", "b"));
        assert_eq!(x("ns/b"), None);
        cache.advance("ns/a", &at("21", "written again"));
        cache.remove("ns/a");
        assert_eq!(x("ns/a"), None, "a deletion takes the write with it");
    }

    #[test]
    fn a_label_scan_skips_only_objects_whose_text_cannot_hold_the_labels() {
        let cache = Cache::default();
        let mut quoted = child("q", None);
        quoted["metadata"]["labels"]["tier"] = r#"say "hi"\"#.into();
        cache.insert("ns/a".into(), &child("a", None));
        cache.insert("ns/q".into(), &quoted);
        let app = [pair_text("app", "x")];
        assert!(cache.get_holding("ns/a", &app).is_some() && cache.get_holding("ns/q", &app).is_some());
        assert!(cache.get_holding("ns/a", &[pair_text("app", "y")]).is_none());
        assert!(
            cache
                .get_holding("ns/q", &[pair_text("tier", r#"say "hi"\"#), pair_text("app", "x")])
                .is_some()
        );
        assert!(
            cache
                .get_holding("ns/a", &[pair_text("tier", r#"say "hi"\"#)])
                .is_none()
        );
        assert!(cache.get_holding("ns/gone", &app).is_none());
    }
}
