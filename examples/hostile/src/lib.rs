//! A misbehaving hook, for the host's sandbox tests: `spec.mode` of the custom resource
//! picks the misbehaviour. Each must fail only its own reconcile.

use orkestra_guest::{Deserialize, Hook, Request, Resource, Response, export_hook, json, kube};

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
}

impl Hook for Hostile {
    fn on_reconcile(request: Request) -> Response {
        let mode = request.parse::<Cr>().map(|cr| cr.spec.mode).unwrap_or_default();
        match mode.as_str() {
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
            _ => Response::ok().status("mode", "ok"),
        }
    }
}

export_hook!(Hostile);
