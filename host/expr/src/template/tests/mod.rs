//! Table-driven tests of the template language and of every library function.

use serde_json::{Value, json};

use super::funcs::DOMAINS;
use super::{Env, Functions, Template, column};
use crate::sentinel::SentinelBits;

mod cases;
use cases::CASES;

/// Monday 2026-01-05 10:30:00 UTC.
const NOW: &str = "2026-01-05T10:30:00Z";

fn data() -> Value {
    json!({
        "apiVersion": "demo.orkestra.io/v1",
        "kind": "Website",
        "metadata": {
            "name": "shop", "namespace": "web", "uid": "u-1", "resourceVersion": "42", "generation": 3,
            "creationTimestamp": "2026-01-05T08:00:00Z",
            "labels": {"tier": "gold"},
            "annotations": {"orkestra.orkspace.io/serve-target": "site", "team": "blue"},
            "ownerReferences": [{"kind": "Tenant", "name": "acme"}],
        },
        "spec": {
            "image": "nginx", "tag": "1.27", "replicas": 3, "ratio": 2.5, "enabled": true, "empty": "",
            "tags": ["a", "b", "c"], "limits": {"cpu": "500m", "memory": "1Gi"},
            "schedule": "*/15 * * * *", "version": "v1.4.2", "cidr": "10.0.0.0/8", "ip": "10.1.2.3",
            "expires": "2026-01-05T12:30:00Z",
        },
        "status": {
            "phase": "Running", "observedGeneration": 3,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Done", "message": "all good"}],
        },
        "children": {
            "deployment": {
                "metadata": {"name": "shop", "generation": 2},
                "spec": {"replicas": 2, "template": {"spec": {"containers": [
                    {"name": "web", "image": "nginx:1.27", "env": [{"name": "MODE", "value": "prod"}],
                     "ports": [{"name": "http", "containerPort": 80}, {"name": "metrics", "containerPort": 9090}]},
                ]}}},
                "status": {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "observedGeneration": 2},
                "_pods": [
                    {"metadata": {"name": "shop-1"}, "status": {"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}],
                     "containerStatuses": [{"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}},
                    {"metadata": {"name": "shop-2"}, "status": {"conditions": [{"type": "Ready", "status": "False"}],
                     "containerStatuses": [{"restartCount": 1, "state": {"running": {}}}]}},
                ],
                "_warnings": [{"reason": "BackOff", "message": "restarting failed container"}],
                "_replicaSets": [
                    {"metadata": {"name": "shop-1", "annotations": {"deployment.kubernetes.io/revision": "1"}}},
                    {"metadata": {"name": "shop-2", "annotations": {"deployment.kubernetes.io/revision": "2"}}},
                ],
            },
            "nightly": {"status": {"lastScheduleTime": "2026-01-05T02:00:00Z"}},
            "service": {
                "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80, "nodePort": 30080}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "hostname": "lb.example"}]}},
            },
            "endpoints": {"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]},
            "job": {"status": {"succeeded": 1, "active": 0, "conditions": [{"type": "Complete", "status": "True"}]}},
            "replicaset": {"_owner": {"name": "shop", "kind": "Deployment", "uid": "d1"}},
            "statefulset": {"_pvcs": [{"metadata": {"name": "data-db-0"}}, {"metadata": {"name": "data-db-1"}}]},
            "pvc": {
                "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
                "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}},
                "_pv": {"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "csi.example"}},
                        "spec": {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem", "accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}},
                "_storageClass": {"metadata": {"name": "fast"}, "provisioner": "csi.example", "reclaimPolicy": "Delete"},
            },
            "svc": {
                "_endpoints": [{"ip": "10.0.0.1", "port": 80}, {"ip": "10.0.0.2", "port": 80, "ready": false}, {"ip": "10.0.0.3", "port": 80}],
                "_backingPods": [{"metadata": {"name": "shop-a"}}, {"metadata": {"name": "shop-b"}}],
            },
            "pod": {"spec": {"nodeName": "node-1"}, "_node": {"name": "node-1", "zone": "eu-1a", "region": "eu-1", "instanceType": "m5.large"}},
            "hpa": {
                "spec": {"maxReplicas": 6, "scaleTargetRef": {"kind": "Deployment", "name": "shop-deployment"}},
                "status": {"currentReplicas": 4, "desiredReplicas": 6, "conditions": [
                    {"type": "ScalingActive", "status": "True"}, {"type": "AbleToScale", "status": "True"},
                    {"type": "ScalingLimited", "status": "False"}]},
                "_currentMetrics": [{"type": "Resource"}, {"type": "External"}],
            },
            "cj": {
                "status": {"lastScheduleTime": "2026-01-05T02:00:00Z", "active": [{"name": "nightly-1"}], "nextScheduleTime": "2026-01-06T02:00:00Z"},
                "_activeJobs": [{"name": "nightly-1"}],
                "_lastJob": {"metadata": {"name": "nightly-1"}, "status": {"startTime": "2026-01-05T02:00:05Z", "succeeded": 1}},
                "_lastSuccessfulJob": {"metadata": {"name": "nightly-0"}, "status": {"completionTime": "2026-01-04T02:03:00Z"}},
            },
            "node": {
                "metadata": {"labels": {"size": "4"}},
                "spec": {"taints": [{"key": "dedicated"}]},
                "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi"},
                           "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]},
            },
            "sts": {"status": {"currentRevision": "db-6d8", "updateRevision": "db-7a2"}},
            "req": {"spec": {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}},
            "jobpods": {"_pods": [
                {"metadata": {"name": "mig-0"}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Succeeded",
                 "containerStatuses": [{"name": "main", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}},
                {"metadata": {"name": "mig-1"}, "spec": {"nodeName": "node-2"}, "status": {"phase": "Failed",
                 "containerStatuses": [{"name": "main", "restartCount": 2, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}},
                {"metadata": {"name": "mig-2"}, "status": {"phase": "Pending",
                 "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}},
            ]},
            "ing": {
                "spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example"}, {"host": "b.example"}],
                         "tls": [{"hosts": ["a.example"], "secretName": "a-cert"}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example"}]}},
                "_loadBalancerIPs": ["1.2.3.4", "lb.example"],
                "_tlsSecrets": [{"metadata": {"name": "a-cert"}}],
            },
        },
        "prom": {"data": {"result": [{"value": [1, "0.93"]}]}},
        "promv": {"data": {"resultType": "vector", "result": [{"metric": {"pod": "a"}, "value": [1, "2"]}, {"metric": {"pod": "b"}, "value": [1, "5"]}]}},
        "proms": {"data": {"resultType": "scalar", "result": [1, "7"]}},
    })
}

fn env() -> Env<'static> {
    Env {
        now: NOW.parse().unwrap(),
        notes: &[],
        sentinels: SentinelBits::default(),
    }
}

fn render(src: &str) -> Result<String, String> {
    let template = Template::compile(src, Functions::builtin()).map_err(|e| format!("parse: {e}"))?;
    template.render(&env(), &data()).map_err(|e| format!("exec: {e}"))
}

#[test]
fn every_case_renders_as_expected() {
    let mut failures = Vec::new();
    for (src, want) in CASES {
        match render(src) {
            Ok(got) if got == *want => {}
            Ok(got) => failures.push(format!("{src}\n    want {want:?}\n    got  {got:?}")),
            Err(e) => failures.push(format!("{src}\n    want {want:?}\n    error {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_library_function_has_a_case() {
    let all_cases: String = CASES.iter().map(|(src, _)| *src).collect::<Vec<_>>().join(" ");
    let words: std::collections::HashSet<&str> =
        all_cases.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
    let missing: Vec<&str> = DOMAINS
        .iter()
        .flat_map(|d| d.entries)
        .map(|e| e.name)
        .filter(|n| !words.contains(n))
        .collect();
    assert!(missing.is_empty(), "functions without a test case: {missing:?}");
}

#[test]
fn parse_errors_carry_the_column() {
    for (src, col, message) in [
        ("{{ .spec.x | nosuch }}", 14, "function \"nosuch\" not defined"),
        ("abc {{ if .x }}", 8, "unclosed {{if}}: missing {{end}}"),
        ("{{ $y }}", 4, "undefined variable \"$y\""),
        ("{{ .a }} {{ end }}", 13, "unexpected {{end}}"),
        ("{{ .a | .b }}", 9, "non-function in pipeline after |"),
        ("é {{ \"x }}", 6, "unterminated quoted string"),
        ("{{ break }}", 4, "{{break}} outside {{range}}"),
        ("{{ define \"x\" }}", 4, "not supported"),
    ] {
        let err = Template::compile(src, Functions::builtin()).unwrap_err();
        assert!(err.message.contains(message), "{src}: {err:?}");
        assert_eq!(column(src, err.offset), col, "{src}: {err:?}");
    }
}

#[test]
fn evaluation_errors_name_the_function_and_position() {
    let err = render("ok {{ div 1 0 }}").unwrap_err();
    assert!(err.contains("error calling div: division by zero"), "{err}");
    let template = Template::compile("{{ .spec.image.x }}", Functions::builtin()).unwrap();
    let err = template.render(&env(), &data()).unwrap_err();
    assert_eq!(err.message, "can't evaluate field x in type string");
    let err = render("{{ .spec.image 1 }}").unwrap_err();
    assert!(err.contains("can't give argument to non-function"), "{err}");
}

#[test]
fn evaluate_keeps_the_type_of_a_single_action() {
    let template = Template::compile("{{ gt .spec.replicas 2 }}", Functions::builtin()).unwrap();
    assert_eq!(template.evaluate(&env(), &data()).unwrap(), json!(true));
    let template = Template::compile("n={{ .spec.replicas }}", Functions::builtin()).unwrap();
    assert_eq!(template.evaluate(&env(), &data()).unwrap(), json!("n=3"));
    assert!(
        Template::compile("no actions", Functions::builtin())
            .unwrap()
            .is_literal()
    );
}

#[test]
fn notes_are_zero_argument_functions_that_may_call_each_other() {
    let names = ["fullImage", "isProd", "loop"];
    let functions = Functions::with_notes(names);
    let notes: Vec<Template> = [
        "{{ .spec.image }}:{{ .spec.tag }}",
        "{{ eq (index .metadata.labels \"tier\") \"gold\" }}",
        "{{ loop }}",
    ]
    .iter()
    .map(|src| Template::compile(src, &functions).unwrap())
    .collect();
    let env = Env { notes: &notes, ..env() };
    let template = Template::compile("{{ fullImage }} {{ if isProd }}prod{{ end }}", &functions).unwrap();
    assert_eq!(template.render(&env, &data()).unwrap(), "nginx:1.27 prod");
    let cyclic = Template::compile("{{ loop }}", &functions).unwrap();
    assert!(
        cyclic
            .render(&env, &data())
            .unwrap_err()
            .message
            .contains("more than 32 deep")
    );
}

#[test]
fn sentinels_read_the_bits_of_the_current_event() {
    let template = Template::compile("{{ generationChanged }}/{{ labelsChanged }}", Functions::builtin()).unwrap();
    let env = Env {
        sentinels: SentinelBits(1),
        ..env()
    };
    assert_eq!(template.render(&env, &data()).unwrap(), "true/false");
    let called: Vec<String> = template.functions_called().into_iter().map(|(n, _)| n).collect();
    assert_eq!(called, ["generationChanged", "labelsChanged"]);
}

mod never_panics {
    use proptest::prelude::*;

    use super::*;

    /// Template-ish text: actions, keywords, literals and noise.
    fn templateish() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "{{",
            "}}",
            "{{-",
            "-}}",
            " ",
            ".spec",
            ".x",
            "$",
            "$v",
            ":=",
            "=",
            "|",
            "(",
            ")",
            "\"s\"",
            "`r`",
            "'c'",
            "1",
            "-2.5e3",
            "if",
            "else",
            "end",
            "range",
            "with",
            "break",
            "continue",
            "and",
            "or",
            "not",
            "eq",
            "index",
            "printf \"%d %s %v\"",
            "len",
            "default",
            "upper",
            "div",
            "slice",
            "nil",
            "true",
            "/*",
            "*/",
            ",",
            "\\n",
            "é",
        ]);
        prop::collection::vec(pieces, 0..24).prop_map(|p| p.join(""))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn compiling_and_rendering_never_panics(src in templateish()) {
            if let Ok(template) = Template::compile(&src, Functions::builtin()) {
                let _ = template.render(&env(), &data());
                let _ = template.evaluate(&env(), &data());
            }
        }

        #[test]
        fn compiling_arbitrary_text_never_panics(src in "\\PC{0,80}") {
            let _ = Template::compile(&src, Functions::builtin());
        }
    }
}

#[test]
fn a_katalogs_table_parses_each_template_text_once() {
    let functions = Functions::with_notes(["tier"]);
    let text = "{{ .spec.image | default \"nginx\" }}";
    let (a, b) = (
        Template::compile(text, &functions).unwrap(),
        Template::compile(text, &functions).unwrap(),
    );
    let nodes = |t: &Template| match &t.body {
        super::Body::Nodes(nodes) => nodes.clone(),
        super::Body::Literal => panic!("{text} is not a literal"),
    };
    assert!(
        std::sync::Arc::ptr_eq(&nodes(&a), &nodes(&b)),
        "the second compile reuses the parse"
    );
    // The built-in table keeps no parses (it outlives every Katalog).
    let (c, d) = (
        Template::compile(text, Functions::builtin()).unwrap(),
        Template::compile(text, Functions::builtin()).unwrap(),
    );
    assert!(!std::sync::Arc::ptr_eq(&nodes(&c), &nodes(&d)));
    let data = json!({"spec": {}});
    assert_eq!(a.render(&Env::now(), &data).unwrap(), "nginx");
}
