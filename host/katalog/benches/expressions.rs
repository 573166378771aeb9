//! Expression engine figures: a typical gate (3 conditions over a ~4 KB CR) and the render
//! of a 20-field resource template, per call. Targets on the project's 2-core machines:
//! under 5 µs and under 50 µs. Run: `cargo bench -p orkestra-katalog --bench expressions`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use orkestra_expr::condition::{ConditionSpec, Conditions};
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::{Functions, Template};
use orkestra_katalog::{read, yaml};
use serde_json::{Value, json};

/// A CR of about 4 KB: metadata with labels and annotations, a spec with nested lists.
fn cr() -> Value {
    let items: Vec<Value> = (0..50)
        .map(|i| json!({"name": format!("item-{i}"), "port": 8000 + i, "enabled": i % 2 == 0, "tags": ["a", "b"]}))
        .collect();
    let object = json!({
        "apiVersion": "demo.orkestra.io/v1",
        "kind": "Website",
        "metadata": {
            "name": "shop", "namespace": "web", "uid": "6f1c2a", "generation": 4, "resourceVersion": "123456",
            "labels": {"tier": "gold", "team": "payments", "env": "prod"},
            "annotations": {"orkestra.orkspace.io/managed-by": "website", "note": "x".repeat(400)},
        },
        "spec": {"image": "nginx", "tag": "1.27", "replicas": 3, "enabled": true, "tier": "gold", "items": items},
        "status": {"phase": "Running", "observedGeneration": 4},
    });
    let size = serde_json::to_string(&object).map(|s| s.len()).unwrap_or(0);
    assert!((3500..6000).contains(&size), "the benchmark CR is {size} bytes");
    object
}

fn conditions(text: &str) -> Vec<ConditionSpec> {
    let node = yaml::parse(text).expect("yaml");
    read::<Vec<ConditionSpec>>(&node, "when").expect("conditions").0
}

/// Median and 99th percentile of `runs` samples, each the mean of `batch` calls, in ns.
fn measure(batch: u32, runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(batch)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[runs / 2], samples[runs * 99 / 100])
}

fn report(name: &str, (median, p99): (f64, f64), target: Duration) {
    let verdict = if median < target.as_nanos() as f64 {
        "within"
    } else {
        "OVER"
    };
    println!("{name:<48} median {median:>9.0} ns   p99 {p99:>9.0} ns   target < {target:?} ({verdict})");
}

fn main() {
    let object = cr();
    let notes: Vec<Template> = Vec::new();
    let resolver = Resolver::new(&object, &notes);

    let when = conditions(
        "- {field: spec.enabled, equals: 'true'}\n- {field: metadata.labels.tier, in: 'gold,platinum'}\n- {field: status.observedGeneration, greaterThanOrEqual: 3}\n",
    );
    let gate = Conditions::compile(&when, &[], Functions::builtin()).expect("gate");
    assert!(gate.passes(&resolver, None));
    report(
        "gate: 3 conditions (field paths)",
        measure(10_000, 200, || {
            black_box(gate.passes(black_box(&resolver), None));
        }),
        Duration::from_micros(5),
    );

    let templated = conditions(
        "- {field: '{{ .spec.enabled }}', equals: 'true'}\n- {field: '{{ index .metadata.labels \"tier\" }}', in: 'gold,platinum'}\n- {field: status.observedGeneration, greaterThanOrEqual: '{{ sub .metadata.generation 1 }}'}\n",
    );
    let templated_gate = Conditions::compile(&templated, &[], Functions::builtin()).expect("gate");
    assert!(templated_gate.passes(&resolver, None));
    report(
        "gate: 3 conditions (templates)",
        measure(10_000, 200, || {
            black_box(templated_gate.passes(black_box(&resolver), None));
        }),
        Duration::from_micros(5),
    );

    report(
        "gate incl. building the resolver",
        measure(5_000, 200, || {
            let resolver = Resolver::new(black_box(&object), &notes);
            black_box(gate.passes(&resolver, None));
        }),
        Duration::from_micros(5),
    );

    // A Deployment-sized template: 20 templated fields, as a Katalog renders them.
    let fields = [
        "{{ .metadata.name }}",
        "{{ .metadata.namespace }}",
        "{{ .spec.image }}:{{ .spec.tag }}",
        "{{ .spec.replicas | default 1 }}",
        "{{ .metadata.labels.tier }}",
        "{{ .metadata.labels.team | upper }}",
        "{{ .metadata.name }}-svc",
        "{{ printf \"%s-%d\" .metadata.name .metadata.generation }}",
        "{{ if .spec.enabled }}on{{ else }}off{{ end }}",
        "{{ len .spec.items }}",
        "{{ (index .spec.items 0).name }}",
        "{{ (index .spec.items 1).port }}",
        "{{ .spec.missing | default \"fallback\" }}",
        "{{ .metadata.uid }}",
        "{{ eq .spec.tier \"gold\" }}",
        "{{ .status.phase | lower }}",
        "{{ trimPrefix \"ng\" .spec.image }}",
        "{{ join \",\" (mapKeys .metadata.labels) }}",
        "{{ add .spec.replicas 2 }}",
        "{{ .metadata.resourceVersion }}",
    ];
    let templates: Vec<Template> = fields
        .iter()
        .map(|f| Template::compile(f, Functions::builtin()).expect("template"))
        .collect();
    if std::env::var_os("ORK_BENCH_DETAIL").is_some() {
        for template in &templates {
            let (median, _) = measure(2_000, 50, || {
                black_box(resolver.render(template).expect("render"));
            });
            println!("  {median:>8.0} ns  {}", template.source());
        }
    }
    report(
        "render: 20-field resource template",
        measure(2_000, 200, || {
            for template in &templates {
                black_box(resolver.render(template).expect("render"));
            }
        }),
        Duration::from_micros(50),
    );
}
