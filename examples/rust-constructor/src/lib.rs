//! A constructor for the `cache` Katalog: a `Cache` custom resource becomes a Deployment, a
//! Service and a ConfigMap of settings, all decided in code; the status says where to
//! connect. No templates are involved.

use std::time::Duration;

use orkestra_guest::{Constructor, Request, Resource, Response, export_constructor, json};

struct Cache;

const PORT: u16 = 6379;

impl Constructor for Cache {
    fn reconcile(request: Request) -> Response {
        let name = request.name();
        let replicas = request.spec()["replicas"].as_u64().unwrap_or(1);
        if replicas > 5 {
            return Response::error(
                "TooManyReplicas",
                format!("replicas is {replicas}; at most 5 are supported"),
            );
        }
        let memory_mb = request.spec()["memoryMb"].as_u64().unwrap_or(64);
        let labels = json!({ "app": name });
        let settings = Resource::new("v1", "ConfigMap", &format!("{name}-settings")).field(
            "data",
            json!({ "maxmemory": format!("{memory_mb}mb"), "policy": "allkeys-lru" }),
        );
        let deployment = Resource::new("apps/v1", "Deployment", name).field(
            "spec",
            json!({
                "replicas": replicas,
                "selector": { "matchLabels": labels },
                "template": {
                    "metadata": { "labels": labels },
                    "spec": { "containers": [{
                        "name": "cache",
                        "image": "redis:7",
                        "args": ["--maxmemory", format!("{memory_mb}mb")],
                        "ports": [{ "containerPort": PORT, "protocol": "TCP" }],
                    }]},
                },
            }),
        );
        // Server-side apply keys ports by (port, protocol): name the protocol.
        let service = Resource::new("v1", "Service", name).field(
            "spec",
            json!({ "selector": labels, "ports": [{ "port": PORT, "targetPort": PORT, "protocol": "TCP" }] }),
        );
        let namespace = request.namespace().unwrap_or("default");
        // Come back now and then to notice a hand-deleted child even without an event.
        let mut response = Response::requeue_after(Duration::from_secs(60))
            .resource(settings)
            .resource(deployment);
        // Without `expose`, no Service: the host deletes the one returned before.
        if request.spec()["expose"].as_bool().unwrap_or(true) {
            response = response.resource(service);
        }
        response
            .status("endpoint", format!("{name}.{namespace}.svc:{PORT}"))
            .status("replicas", replicas)
            .status("phase", "Provisioned")
    }
}

export_constructor!(Cache);
