//! A misbehaving hook, for the host's sandbox tests: `spec.mode` of the custom resource
//! picks the misbehaviour. Each must fail only its own reconcile, and cost the host no more
//! than the component's limits allow.

use std::time::Duration;

use orkestra_guest::{Deserialize, Hook, Request, Resource, Response, Value, export_hook, json, kube, log};

struct Hostile;

/// Only what the hook reads: the rest of the object is skipped, not parsed.
#[derive(Deserialize)]
#[serde(crate = "orkestra_guest::serde")]
struct Cr {
    #[serde(default)]
    spec: Spec,
}

#[derive(Deserialize, Default)]
#[serde(crate = "orkestra_guest::serde")]
struct Spec {
    #[serde(default)]
    mode: String,
    /// How many children the `children` mode returns (default 1,000).
    #[serde(default)]
    count: Option<u32>,
}

fn spec(request: &Request) -> Spec {
    request.parse::<Cr>().map(|cr| cr.spec).unwrap_or_default()
}

/// Four host pages, of which the `remember` mode uses one in the middle: nothing else of the
/// guest's state shares it, so only that mode touches it.
static REMEMBERED: std::sync::Mutex<[u8; 16384]> = std::sync::Mutex::new([0; 16384]);

#[link(wasm_import_module = "wasi:cli/stdout@0.2.0")]
unsafe extern "C" {
    /// The raw import, which std would wrap and drop.
    #[link_name = "get-stdout"]
    fn get_stdout() -> i32;
}

/// Calls this instance has served (`recall`).
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// What `hoard` keeps.
static HOARD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// What the middle of [`REMEMBERED`] held (up to a NUL), after writing `key` there.
fn remember(key: &str) -> String {
    let mut page = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    let slot = &mut page[8192..8192 + 256];
    let seen = String::from_utf8_lossy(slot.split(|b| *b == 0).next().unwrap_or_default()).into_owned();
    let key = &key.as_bytes()[..key.len().min(255)];
    slot[..key.len()].copy_from_slice(key);
    slot[key.len()] = 0;
    seen
}

/// Recurses until the wasm stack runs out: nothing in linear memory (no shadow stack), and
/// work after the call so it cannot become a loop.
fn descend(depth: u64) -> u64 {
    if depth == u64::MAX {
        return depth;
    }
    descend(depth + 1).wrapping_mul(3).wrapping_add(depth)
}

/// What `open-files` keeps open for good.
static OPENED: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());

/// The `count` in the ConfigMap `<name>-count` of the CR's namespace, read and written back one
/// higher: a write whose repetition shows.
fn bump(request: &Request) -> Result<u64, kube::Error> {
    let name = format!("{}-count", request.name());
    let count = match kube::get("v1", "ConfigMap", request.namespace(), &name) {
        Ok(map) => map["data"]["count"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0),
        Err(kube::Error::NotFound) => 0,
        Err(error) => return Err(error),
    };
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": request.namespace()},
                        "data": {"count": (count + 1).to_string()}});
    kube::apply(&object)?;
    Ok(count + 1)
}

impl Hook for Hostile {
    /// Leaves the key in its memory as `recall` does, and says what it found there: a call
    /// for a CR that is gone must not see another tenant's.
    fn on_not_found(request: Request) -> Response {
        let seen = remember(request.key());
        Response::ok().status("seen", seen)
    }

    fn on_delete(request: Request) -> Response {
        match spec(&request).mode.as_str() {
            // Never lets its finalizer go.
            "undeletable" => Response::error("StillAttached", "the volume is still attached"),
            _ => Response::ok(),
        }
    }

    fn on_reconcile(request: Request) -> Response {
        let spec = spec(&request);
        match spec.mode.as_str() {
            // Spins until the epoch deadline stops it.
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            // Grows memory until the limit stops it.
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("the hook gave up on {}", request.key()),
            // Waits on the host (a WASI clock), where no epoch can interrupt it: only the
            // wall-clock timeout ends it.
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Response::ok()
            }
            // Takes a while, then answers: for calls in flight during a swap.
            "slow" => {
                std::thread::sleep(std::time::Duration::from_millis(300));
                Response::ok().status("mode", "slow").status("slept", 300)
            }
            // Says what a page of its static memory held when the call began, leaves its key
            // there and waits a while: a fresh instance must always find the page as the
            // component shipped it, even when the kernel swapped it out meanwhile.
            "remember" => {
                let seen = remember(request.key());
                std::thread::sleep(Duration::from_millis(300));
                Response::ok().status("seen", seen)
            }
            // `remember` without the wait, with the calls this instance has served and the
            // memory it holds: what a warm instance keeps from call to call.
            "recall" => {
                let seen = remember(request.key());
                let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                Response::ok().status("seen", seen).status("calls", calls)
            }
            // Traps on any instance that has served a call before: what a warm instance
            // kept breaks it.
            "fresh-only" => {
                let before = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                assert!(before == 0, "this instance has served {before} calls before");
                Response::ok().status("calls", before + 1)
            }
            // Takes handle after handle of stdout and drops none: each is an entry in the
            // host's resource table, host memory outside the instance's own.
            "handles" => {
                for _ in 0..10_000 {
                    // SAFETY: get-stdout takes nothing and returns a new handle.
                    unsafe { get_stdout() };
                }
                Response::ok().status("handles", 10_000)
            }
            // Keeps one more MiB for good on every call.
            "hoard" => {
                let mut hoard = HOARD.lock().unwrap_or_else(|e| e.into_inner());
                hoard.push(vec![7u8; 1 << 20]);
                Response::ok().status("hoarded", hoard.len())
            }
            // Returns more than its result-size limit.
            "oversized" => Response::ok().status("junk", "x".repeat(256 << 10)),
            // Reads a Secret in another namespace, which no grant allows.
            "forbidden" => match kube::get("v1", "Secret", Some("kube-system"), "anything") {
                Ok(_) => Response::ok().status("stolen", true),
                Err(error) => Response::error("ReadFailed", error.to_string()),
            },
            // Ignores the denial, as a careless guest would.
            "forbidden-ignored" => {
                let _ = kube::get("v1", "Secret", Some("kube-system"), "anything");
                Response::ok()
            }
            // Returns a child of a kind it was not granted.
            // A granted child, then one that is not: neither may be applied.
            "forbidden-child" => Response::ok()
                .resource(Resource::new("v1", "ConfigMap", "climber-note").field("data", json!({"a": "b"})))
                .resource(
                    Resource::new("rbac.authorization.k8s.io/v1", "ClusterRole", "escalate").field(
                        "rules",
                        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
                    ),
                ),
            // Looks for a way out of the sandbox: files, environment, network.
            "probe" => {
                let fs = match std::fs::read_to_string("/etc/hostname") {
                    Ok(_) => "read".to_string(),
                    Err(error) => format!("denied: {error}"),
                };
                let net = match std::net::TcpStream::connect("127.0.0.1:6443") {
                    Ok(_) => "connected".to_string(),
                    Err(error) => format!("denied: {error}"),
                };
                Response::ok()
                    .status("fs", fs)
                    .status("env", std::env::vars().count())
                    .status("net", net)
            }
            // Reads what its file grant holds, then tries every way past it: `..`, a symlink
            // that points out, an absolute path elsewhere, writing, creating.
            "files" => {
                let outcome = |result: std::io::Result<String>| match result {
                    Ok(text) => format!("read: {}", text.trim()),
                    Err(error) => format!("denied: {}", error.kind()),
                };
                let wrote = |result: std::io::Result<()>| match result {
                    Ok(()) => "written".to_string(),
                    Err(error) => format!("denied: {}", error.kind()),
                };
                Response::ok()
                    .status("granted", outcome(std::fs::read_to_string("/bundle/policy.txt")))
                    .status("dotdot", outcome(std::fs::read_to_string("/bundle/../secret.txt")))
                    .status("symlink", outcome(std::fs::read_to_string("/bundle/escape/secret.txt")))
                    .status("absolute", outcome(std::fs::read_to_string("/etc/hostname")))
                    .status("write", wrote(std::fs::write("/bundle/policy.txt", "tampered")))
                    .status("create", wrote(std::fs::write("/bundle/new.txt", "x")))
                    .status("mkdir", wrote(std::fs::create_dir("/bundle/sub")))
            }
            // Names built to change the URL they go into: a get that would watch the
            // namespace, a delete that would delete every ConfigMap in it.
            "smuggle" => {
                let outcome = |result: Result<String, kube::Error>| match result {
                    Ok(what) => what,
                    Err(error) => format!("refused: {error}"),
                };
                let namespace = request.namespace();
                let got = kube::get("v1", "ConfigMap", namespace, "?watch=true").map(|_| "read".to_string());
                let slashed = kube::get("v1", "ConfigMap", namespace, "a/b").map(|_| "read".to_string());
                let deleted = kube::delete("v1", "ConfigMap", namespace, "?zz=").map(|()| "deleted".to_string());
                Response::ok()
                    .status("get", outcome(got))
                    .status("slash", outcome(slashed))
                    .status("delete", outcome(deleted))
            }
            // Reads a file of its grant that never answers (a FIFO nobody writes to).
            "fifo" => match std::fs::read_to_string("/bundle/fifo") {
                Ok(text) => Response::ok().status("fifo", text),
                Err(error) => Response::error("ReadFailed", error.to_string()),
            },
            // A status that differs on every call (the clock, and a hash keyed from WASI's
            // random source), and no requeue asked for.
            "churn" => {
                use std::hash::BuildHasher as _;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default();
                let nonce = std::collections::hash_map::RandomState::new().hash_one(request.key());
                Response::ok()
                    .status("at", now.to_string())
                    .status("nonce", nonce.to_string())
                    .event("Churned", now.to_string())
            }
            // Copies the Secret `db` of its namespace, which it is granted to read, into a
            // child Secret of its own.
            "secret" => match kube::get("v1", "Secret", request.namespace(), "db") {
                Ok(secret) => Response::ok()
                    .resource(
                        Resource::new("v1", "Secret", &format!("{}-copy", request.name()))
                            .field("data", secret["data"].clone()),
                    )
                    .status("keys", secret["data"].as_object().map_or(0, |d| d.len())),
                Err(error) => Response::error("ReadFailed", error.to_string()),
            },
            // Lists its namespace's Secrets (their items come without a kind), logs the first
            // value it finds and puts it in its status.
            "secret-list" => match kube::list("v1", "Secret", request.namespace(), None) {
                Ok(items) => {
                    let first = items
                        .iter()
                        .find_map(|secret| secret["data"].as_object()?.values().next()?.as_str().map(String::from))
                        .unwrap_or_default();
                    log::info(&format!("the first secret value is {first}"));
                    Response::ok().status("secrets", items.len()).status("first", first)
                }
                Err(error) => Response::error("ListFailed", error.to_string()),
            },
            // Takes over another CR's child through its kube grant: rewrites it, then deletes it.
            "grab" => {
                let namespace = request.namespace().unwrap_or("default");
                let victim = request
                    .get("/spec/victim")
                    .and_then(Value::as_str)
                    .unwrap_or("victim-t");
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": victim, "namespace": namespace},
                                    "data": {"grabbed": "yes"}});
                let applied = match kube::apply(&object) {
                    Ok(_) => "applied".to_string(),
                    Err(error) => format!("refused: {error}"),
                };
                let deleted = match kube::delete("v1", "ConfigMap", Some(namespace), victim) {
                    Ok(()) => "deleted".to_string(),
                    Err(error) => format!("refused: {error}"),
                };
                Response::ok().status("apply", applied).status("delete", deleted)
            }
            // A child carrying a finalizer of its own, which nothing would ever remove.
            "finalize-child" => {
                let mut child = Resource::new("v1", "ConfigMap", &format!("{}-held", request.name()))
                    .field("data", json!({"held": "yes"}))
                    .into_value();
                child["metadata"]["finalizers"] = json!(["hostile.example/never"]);
                Response::ok().resource(child)
            }
            // 100,000 empty events: nothing in bytes, a write each.
            "events" => (0..100_000).fold(Response::ok(), |r, _| r.event("", "")),
            // Many children (1,000 unless spec.count says), each small.
            "children" => (0..spec.count.unwrap_or(1_000)).fold(Response::ok(), |r, i| {
                r.resource(
                    Resource::new("v1", "ConfigMap", &format!("flood-{i}")).field("data", json!({"i": i.to_string()})),
                )
            }),
            // Lists the namespace's ConfigMaps four times: as many bytes as the host hands over.
            "list" => {
                let listed: Vec<Value> = (0..4)
                    .map(|_| match kube::list("v1", "ConfigMap", request.namespace(), None) {
                        Ok(items) => json!(items.len()),
                        Err(error) => json!(error.to_string()),
                    })
                    .collect();
                Response::ok().status("listed", listed)
            }
            // A million empty log lines.
            "logs" => {
                for _ in 0..1_000_000 {
                    log::warn("");
                }
                Response::ok().status("mode", "logs")
            }
            // A failure with a 60 KB message, as every retry would log it.
            "long-failure" => Response::error("Verbose", "x".repeat(60_000)),
            // Asks to run again at once, forever.
            "requeue0" => Response::requeue_after(Duration::ZERO),
            "recurse" => Response::ok().status("depth", descend(0)),
            "exit" => std::process::exit(3),
            // A status nested deeper than any JSON parser should follow.
            "deep-status" => {
                let deep = (0..200).fold(json!("bottom"), |inner, _| json!({"d": inner}));
                Response::ok().status("deep", deep)
            }
            // Writes (one more in its counter ConfigMap), then traps on an instance that
            // has served a call before: a retry of the call would write again.
            "write-then-trap" => {
                let before = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match bump(&request) {
                    Ok(count) if before == 0 => Response::ok().status("count", count),
                    Ok(count) => panic!("wrote count {count}, then trapped on a reused instance"),
                    Err(error) => Response::error("WriteFailed", error.to_string()),
                }
            }
            // Opens its granted file again and again (up to spec.count, default 200) and
            // keeps every handle: each is a descriptor of the host process.
            "open-files" => {
                let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
                let wanted = spec.count.unwrap_or(200) as usize;
                let mut refused = String::new();
                for _ in 0..wanted {
                    match std::fs::File::open("/bundle/policy.txt") {
                        Ok(file) => opened.push(file),
                        Err(error) => {
                            refused = error.to_string();
                            break;
                        }
                    }
                }
                Response::ok().status("open", opened.len()).status("refused", refused)
            }
            // Applies a ConfigMap labelled with another CR's owner UID (spec.victim), so the
            // host would take it for that CR's child.
            "forge-owner" => {
                let victim = request.get("/spec/victim").and_then(Value::as_str).unwrap_or("none");
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": format!("{}-forged", request.name()),
                                                 "namespace": request.namespace(),
                                                 "labels": {"orkestra.orkspace.io/owner-uid": victim}},
                                    "data": {"forged": "yes"}});
                match kube::apply(&object) {
                    Ok(_) => Response::ok().status("apply", "applied"),
                    Err(error) => Response::ok().status("apply", format!("refused: {error}")),
                }
            }
            // Writes spec.count ConfigMaps (default 10) into the namespace spec.target names
            // (its grant allows it): requests about another tenant's namespace.
            "spray" => {
                let target = request.get("/spec/target").and_then(Value::as_str).unwrap_or("default");
                let mut written = 0;
                for i in 0..spec.count.unwrap_or(10) {
                    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": format!("{}-spray-{i}", request.name()), "namespace": target},
                                        "data": {"i": i.to_string()}});
                    if kube::apply(&object).is_ok() {
                        written += 1;
                    }
                }
                Response::ok().status("sprayed", written)
            }
            // A child named like the one another tenant's `<name>` owns.
            "steal" => Response::ok().resource(
                Resource::new("v1", "ConfigMap", &format!("{}-t", request.name()))
                    .field("data", json!({"stolen": "yes"})),
            ),
            _ => Response::ok().status("mode", "ok"),
        }
    }
}

export_hook!(Hostile);
