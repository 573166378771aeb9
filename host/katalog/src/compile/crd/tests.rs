use super::*;

#[test]
fn retry_delays_grow_by_the_multiplier_up_to_the_max() {
    let policy = RetryPolicy::DEFAULT;
    let delays: Vec<Duration> = (1..=8).map(|n| policy.delay(n)).collect();
    assert_eq!(delays[..4], [500, 1000, 2000, 4000].map(Duration::from_millis));
    assert_eq!(delays[7], Duration::from_secs(30));
    let shorthand = RetryPolicy::from_spec(&crate::model::RetryBackoff {
        initial: Some("5s".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!((shorthand.initial, shorthand.attempts), (Duration::from_secs(5), 3));
}

/// What loading (which compiles) says about `operator_box`: the errors, located.
fn first_error(operator_box: &str) -> String {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n{operator_box}"
    );
    crate::load::load_sources(&[("k.yaml".into(), text)]).map_or_else(|e| e.to_string(), |_| "compiles".into())
}

#[test]
fn watch_gates_and_keys_compile_with_the_katalog() {
    let watch = "        observe:\n          watch:\n            - apiVersion: v1\n              kind: ConfigMap\n";
    let bad_key = first_error(&format!(
        "{watch}              keyFrom: {{name: '{{{{ .metadata.name | nosuch }}}}'}}\n"
    ));
    assert!(
        bad_key.contains("keyFrom.name") && bad_key.contains("nosuch"),
        "{bad_key}"
    );
    let bad_gate = first_error(&format!(
        "{watch}              enqueueGate: {{when: [{{field: '{{{{ nosuch }}}}', equals: x}}]}}\n"
    ));
    assert!(
        bad_gate.contains("enqueueGate") && bad_gate.contains("nosuch"),
        "{bad_gate}"
    );
    let good = first_error(&format!(
        "{watch}              keyFrom: {{name: '{{{{ .metadata.name }}}}'}}\n"
    ));
    assert_eq!(good, "compiles");
}

fn katalog(reconcile: &str) -> crate::compile::Compiled {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n        reconcile:\n{reconcile}"
    );
    crate::load::load_sources(&[("k.yaml".into(), text)]).unwrap()
}

#[test]
fn a_component_swap_runs_like_before_and_a_template_change_does_not() {
    let hooks = |file: &str, data: &str| {
        format!(
            "          hooks: {{component: {file}}}\n          onReconcile:\n            configMaps: [{{data: {{a: '{data}'}}}}]\n"
        )
    };
    let running = katalog(&hooks("a.wasm", "{{ .spec.a }}"));
    let swapped = katalog(&hooks("b.wasm", "{{ .spec.a }}"));
    let edited = katalog(&hooks("a.wasm", "{{ .spec.b }}"));
    let web = |k: &crate::compile::Compiled| k.crds["web"].clone();
    assert!(web(&running).runs_like(&web(&swapped)));
    assert_ne!(web(&running).crd_box().component, web(&swapped).crd_box().component);
    assert!(!web(&running).runs_like(&web(&edited)));
    assert!(web(&running).runs_like(&web(&katalog(&hooks("a.wasm", "{{ .spec.a }}")))));
}

#[test]
fn what_only_the_compile_pass_finds_is_located_in_the_file() {
    let error = first_error(
        "        observe:\n          cross:\n            - crd: web\n              source: {host: 'http://peer:8080', protocol: grpc}\n",
    );
    assert!(
        error.contains(
            "k.yaml:11:60: spec.crds.web.operatorBox.observe.cross[0].source.protocol: grpc is not a protocol"
        ),
        "{error}"
    );
    let status = first_error(
        "        reconcile:\n          onCreate:\n            external:\n              - {name: ping, url: 'http://x', expectedStatus: 700}\n",
    );
    assert!(
        status.contains("k.yaml:11:63: spec.crds.web.operatorBox.reconcile.onCreate.external[0].expectedStatus: 700 is not an HTTP status code"),
        "{status}"
    );
}

#[test]
fn only_a_cr_whose_deletion_has_work_the_garbage_collector_cannot_do_holds_it() {
    let holds = |reconcile: &str| {
        let web = katalog(reconcile).crds["web"].clone();
        web.holds_deletion(web.crd_box())
    };
    let in_place = "          onReconcile:\n            configMaps: [{data: {a: b}}]\n";
    assert!(!holds(in_place), "owner references collect a ConfigMap beside its CR");
    assert!(!holds(
        "          onReconcile:\n            configMaps: [{namespace: '{{.metadata.namespace}}', data: {a: b}}]\n"
    ));
    for (why, reconcile) in [
        (
            "another namespace",
            "          onReconcile:\n            configMaps: [{namespace: shared, data: {a: b}}]\n",
        ),
        (
            "copies",
            "          onReconcile:\n            configMaps: [{toNamespaces: [a, b], data: {a: b}}]\n",
        ),
        (
            "cluster-scoped",
            "          onCreate:\n            clusterRoles: [{rules: []}]\n",
        ),
        (
            "a custom kind",
            "          onReconcile:\n            custom: [{apiVersion: x.io/v1, kind: Thing}]\n",
        ),
        (
            "onDelete",
            &format!("{in_place}          onDelete:\n            jobs: [{{image: busybox}}]\n"),
        ),
        (
            "a component",
            &format!("{in_place}          hooks: {{component: a.wasm}}\n"),
        ),
    ] {
        assert!(holds(reconcile), "{why}");
    }
    // Finalizers the Katalog names (Katalog-wide, or the cleanup one itself on the CRD).
    for (katalog_wide, runtime) in [
        ("  finalizers: [example.io/audit]\n", "{}"),
        ("", "{runtime: {finalizers: [orkestra.orkspace.io/cleanup]}}"),
    ] {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n{katalog_wide}  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox: {runtime}\n"
        );
        let web = crate::load::load_sources(&[("k.yaml".into(), text)]).unwrap().crds["web"].clone();
        assert!(web.holds_deletion(web.crd_box()), "declared: {katalog_wide}{runtime}");
    }
}

#[test]
fn queue_fairness_and_priority_compile_with_defaults_and_name_a_bad_field() {
    let compiled = |queue: &str| {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n        reconcile:\n          queue: {queue}\n"
        );
        let loaded = crate::load::load_sources(&[("k.yaml".into(), text)]).map_err(|e| e.to_string())?;
        Ok::<_, String>(loaded.crds["web"].flows.clone())
    };
    assert_eq!(compiled("{}").unwrap(), FlowRules::default());
    assert_eq!(FlowRules::default().by, FlowBy::Namespace);
    assert_eq!(FlowRules::default().aging, AGING);
    let rules =
        compiled("{fairness: {by: 'label:example.com/team', weights: {gold: 4}}, priority: {aging: 30s}}").unwrap();
    assert_eq!(rules.by, FlowBy::Label("example.com/team".into()));
    assert_eq!(rules.weights["gold"], 4);
    assert_eq!(rules.aging, Duration::from_secs(30));
    assert_eq!(
        compiled("{fairness: {by: none}, priority: {aging: 0s}}").unwrap().aging,
        Duration::ZERO
    );
    for (queue, names) in [
        ("{fairness: {by: tenant}}", "queue.fairness.by"),
        ("{fairness: {by: 'label:-bad-'}}", "queue.fairness.by"),
        ("{fairness: {weights: {gold: 0}}}", "queue.fairness.weights.gold"),
        ("{fairness: {weights: {gold: 1000}}}", "queue.fairness.weights.gold"),
        ("{priority: {aging: 2h}}", "queue.priority.aging"),
        ("{priority: {aging: soon}}", "queue.priority.aging"),
        ("{fairness: {byy: namespace}}", "byy"),
    ] {
        let error = compiled(queue).unwrap_err();
        assert!(error.contains(names), "{queue}: {error}");
    }
}
