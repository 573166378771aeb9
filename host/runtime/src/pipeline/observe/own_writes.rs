//! Own writes are not new work. When the runtime writes an object (a CR's status, its
//! finalizers or stamps, a child it applies), the watch brings that write back as an event;
//! were it a trigger, a status holding a timestamp would write, re-trigger and write again
//! without end. Each write is announced before it is sent ([`OwnWrites::write`]): an event
//! of that object arriving meanwhile is held, and once the write is answered, the event
//! carrying the write's own resourceVersion (whose only change is what this runtime wrote) is
//! dropped, and anything else goes on to the enqueue path. An event after a relist is never
//! screened: its change may include others' writes.
//!
//! A write's answer is also what the next reconcile reads of that object, where the watch's
//! cache is connected ([`OwnWrites::read_back_into`]): the echo may come after that
//! reconcile starts.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{Enqueue, Trigger};

/// What is known of one object's writes.
#[derive(Default)]
struct Own {
    /// Writes in flight (usually one).
    writes: u32,
    /// Events that arrived while one was in flight, with their resourceVersions.
    held: Vec<(Trigger, String)>,
    /// The resourceVersions of finished writes whose events have not arrived yet (a few: a
    /// status write may follow a metadata write before the first one's event is back).
    wrote: VecDeque<String>,
}

/// Finished writes whose echoes are still expected, per object.
const EXPECTED: usize = 4;

impl Own {
    fn idle(&self) -> bool {
        self.writes == 0 && self.held.is_empty() && self.wrote.is_empty()
    }

    /// Whether `version` is the echo of one of its writes (forgotten once seen).
    fn echo(&mut self, version: &str) -> bool {
        match self.wrote.iter().position(|v| v == version) {
            Some(at) => {
                self.wrote.remove(at);
                true
            }
            None => false,
        }
    }
}

/// The runtime's writes to the objects of one kind of watch (a CRD's CRs, or its children).
#[derive(Default)]
pub struct OwnWrites {
    objects: Mutex<HashMap<String, Own>>,
    /// Where held events go once they turn out not to be echoes.
    enqueue: OnceLock<Arc<dyn Enqueue>>,
    /// Stores a write's answer (with the object's name among these writes) where reads get it.
    reads: OnceLock<ReadBack>,
}

/// See [`OwnWrites::read_back_into`].
type ReadBack = Box<dyn Fn(&str, &kube::api::DynamicObject) + Send + Sync>;

impl std::fmt::Debug for OwnWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnWrites").field("objects", &self.len()).finish()
    }
}

impl OwnWrites {
    /// Connects the enqueue path (once, when the CRD starts).
    pub fn connect(&self, enqueue: Arc<dyn Enqueue>) {
        let _ = self.enqueue.set(enqueue);
    }

    /// Hands each successful write's answer to `store`, which keeps it in the watch's cache
    /// for reads to get before its echo (once, when the CRD starts).
    pub fn read_back_into(&self, store: impl Fn(&str, &kube::api::DynamicObject) + Send + Sync + 'static) {
        let _ = self.reads.set(Box::new(store));
    }

    /// Sends `write` to `object` (its key in this watch) as an announced write: the
    /// resourceVersion it answers with is remembered, so its echo triggers nothing.
    pub async fn write<E>(
        self: &Arc<Self>,
        object: &str,
        write: impl std::future::Future<Output = Result<kube::api::DynamicObject, E>>,
    ) -> Result<kube::api::DynamicObject, E> {
        let writing = self.begin(object);
        let written = write.await;
        if let Ok(stored) = &written {
            if let Some(store) = self.reads.get() {
                store(object, stored);
            }
            writing.wrote(stored.metadata.resource_version.clone());
        }
        written
    }

    /// A write to `object` (its key in this watch) is about to be sent.
    fn begin(self: &Arc<Self>, object: &str) -> Writing {
        let mut objects = self.objects.lock();
        objects.entry(object.to_string()).or_default().writes += 1;
        Writing {
            owner: self.clone(),
            object: object.to_string(),
            settled: false,
        }
    }

    /// An event of `object` at `version`: the trigger it makes, unless it is the echo of a
    /// write (dropped) or arrives while one is in flight (held until it is answered).
    pub fn screen(&self, object: &str, version: &str, trigger: Trigger) -> Option<Trigger> {
        let mut objects = self.objects.lock();
        let Some(own) = objects.get_mut(object) else {
            return Some(trigger);
        };
        if own.echo(version) {
            if own.idle() {
                objects.remove(object);
            }
            return None;
        }
        if own.writes > 0 {
            own.held.push((trigger, version.to_string()));
            return None;
        }
        Some(trigger)
    }

    fn settle(&self, object: &str, version: Option<String>) {
        let released = {
            let mut objects = self.objects.lock();
            let Some(own) = objects.get_mut(object) else { return };
            own.writes = own.writes.saturating_sub(1);
            if let Some(version) = version {
                if own.wrote.len() == EXPECTED {
                    own.wrote.pop_front();
                }
                own.wrote.push_back(version);
            }
            let mut released = Vec::new();
            for (trigger, seen) in std::mem::take(&mut own.held) {
                if own.echo(&seen) {
                    continue;
                }
                match own.writes {
                    // Not the echo of any write: someone else's change.
                    0 => released.push(trigger),
                    // Perhaps the echo of the write still in flight.
                    _ => own.held.push((trigger, seen)),
                }
            }
            if own.idle() {
                objects.remove(object);
            }
            released
        };
        if let Some(enqueue) = self.enqueue.get() {
            for trigger in released {
                enqueue.offer(trigger);
            }
        }
    }

    /// Objects with a write in flight or an echo still expected.
    pub fn len(&self) -> usize {
        self.objects.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets `object` (deleted): no echo of it is coming.
    pub fn forget(&self, object: &str) {
        let mut objects = self.objects.lock();
        if objects.get(object).is_some_and(|own| own.writes == 0) {
            objects.remove(object);
        }
    }
}

/// A write in flight; say how it ended with [`Writing::wrote`]. Dropped without it, the
/// write counts as failed: what was held goes on as triggers.
struct Writing {
    owner: Arc<OwnWrites>,
    object: String,
    settled: bool,
}

impl Writing {
    /// The write produced `version` (`None`: it failed, or its result is unknown).
    fn wrote(mut self, version: Option<String>) {
        self.settled = true;
        self.owner.settle(&self.object, version);
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        if !self.settled {
            self.owner.settle(&self.object, None);
        }
    }
}

/// The resourceVersion of an object as JSON.
pub fn version_of(object: &serde_json::Value) -> Option<String> {
    object["metadata"]["resourceVersion"].as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::observe::{Offered, Source};

    fn setup() -> (Arc<OwnWrites>, Arc<Offered>) {
        let own = Arc::new(OwnWrites::default());
        let offered = Arc::new(Offered::default());
        own.connect(offered.clone());
        (own, offered)
    }

    fn trigger(key: &str) -> Trigger {
        Trigger::new(key.into(), Source::Primary)
    }

    #[test]
    fn the_echo_of_a_write_is_dropped_whichever_arrives_first() {
        let (own, offered) = setup();
        // The answer first, then the event.
        own.begin("ns/a").wrote(Some("5".into()));
        assert!(own.screen("ns/a", "5", trigger("ns/a")).is_none(), "its echo");
        assert!(own.screen("ns/a", "6", trigger("ns/a")).is_some(), "a later change");
        // The event first: held until the answer says what it was.
        let writing = own.begin("ns/b");
        assert!(own.screen("ns/b", "7", trigger("ns/b")).is_none(), "held");
        writing.wrote(Some("7".into()));
        assert!(offered.0.lock().is_empty(), "it was the echo");
        assert!(own.is_empty(), "nothing kept once the echo is seen");
    }

    #[test]
    fn anything_else_goes_on_and_a_failed_write_releases_what_it_held() {
        let (own, offered) = setup();
        let writing = own.begin("ns/a");
        assert!(own.screen("ns/a", "8", trigger("ns/a")).is_none());
        writing.wrote(Some("9".into()));
        assert_eq!(*offered.0.lock(), ["ns/a"], "someone else's change, held, then offered");
        assert!(
            own.screen("ns/a", "9", trigger("ns/a")).is_none(),
            "our own, arriving after"
        );

        let writing = own.begin("ns/c");
        assert!(own.screen("ns/c", "3", trigger("ns/c")).is_none());
        drop(writing);
        assert_eq!(offered.0.lock().len(), 2, "a failed write drops nothing");
        assert!(own.is_empty());
        assert!(
            own.screen("ns/other", "1", trigger("ns/other")).is_some(),
            "not written: a trigger"
        );
    }

    #[test]
    fn the_echo_of_an_earlier_write_is_known_while_a_later_one_is_in_flight() {
        let (own, offered) = setup();
        own.begin("ns/a").wrote(Some("10".into()));
        let status = own.begin("ns/a");
        assert!(
            own.screen("ns/a", "10", trigger("ns/a")).is_none(),
            "the first write's echo"
        );
        assert!(own.screen("ns/a", "11", trigger("ns/a")).is_none(), "held");
        status.wrote(Some("11".into()));
        assert!(offered.0.lock().is_empty());
        assert!(own.is_empty());
    }

    #[tokio::test]
    async fn a_write_s_answer_is_what_reads_get_before_its_echo() {
        let (own, offered) = setup();
        let cache = crate::pipeline::observe::Cache::default();
        own.read_back_into(cache.read_back(0));
        let cr = |version: &str, ready: bool| {
            serde_json::json!({"apiVersion": "x.io/v1", "kind": "App", "metadata": {"name": "a", "namespace": "ns",
                "resourceVersion": version, "managedFields": [{"manager": "someone"}]}, "status": {"ready": ready}})
        };
        let answer = |version: &str| serde_json::from_value::<kube::api::DynamicObject>(cr(version, true)).unwrap();
        cache.insert("ns/a".into(), &cr("5", false));
        let failed = own.write("ns/a", async { Err::<kube::api::DynamicObject, _>("refused") });
        assert!(failed.await.is_err());
        assert_eq!(
            cache.get("ns/a").unwrap()["status"]["ready"],
            false,
            "a refused write stores nothing"
        );
        own.write("ns/a", async { Ok::<_, ()>(answer("6")) }).await.unwrap();
        let read = cache.get("ns/a").unwrap();
        assert_eq!(read["status"]["ready"], true);
        assert!(
            read["metadata"]["managedFields"].is_null(),
            "shaped as the watch stores it"
        );
        assert!(
            own.screen("ns/a", "6", trigger("ns/a")).is_none(),
            "and its echo is still no trigger"
        );
        assert!(offered.0.lock().is_empty());
    }

    #[test]
    fn two_writes_in_flight_settle_together() {
        let (own, offered) = setup();
        let first = own.begin("k");
        let second = own.begin("k");
        own.screen("k", "1", trigger("k"));
        first.wrote(Some("1".into()));
        own.screen("k", "2", trigger("k"));
        second.wrote(Some("2".into()));
        assert!(offered.0.lock().is_empty());
        own.begin("k").wrote(Some("3".into()));
        own.forget("k");
        assert!(own.is_empty());
    }
}
