//! How a Katalog is composed: motifs (resources by phase, notes, admission rules), copies
//! into namespaces, reconciler profiles, cross reads by label selector or kind, and Komposer
//! files.

use super::*;

#[test]
fn motif_resources_join_on_reconcile_with_their_inputs() {
    let katalog = load(&[testdata("valid/with-motif.yaml")]).unwrap().katalog;
    let reconcile = katalog.crds["build"].entry.operator_box.reconcile.as_ref().unwrap();
    let on_reconcile = reconcile.on_reconcile.as_ref().unwrap();
    assert_eq!(on_reconcile.config_maps.len(), 1, "inline entries stay");
    assert_eq!(on_reconcile.jobs.len(), 1, "the motif's Job joined");
    let inputs = on_reconcile.jobs[0].inputs.as_ref().unwrap();
    assert_eq!(
        inputs,
        &serde_json::json!({"image": "golang:1.22", "retries": 2}),
        "given and defaulted inputs"
    );
    assert!(reconcile.imports.is_empty(), "imports are consumed at load");
}

#[test]
fn motifs_bring_notes_to_the_katalog_status_fields_to_their_crd_and_check_input_types() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    write(
        "notes.yaml",
        "apiVersion: orkestra.orkspace.io/v1\nkind: Motif\nnotes:\n  - {name: fullImage, expression: '{{ .spec.image }}:{{ .spec.tag }}'}\n",
    );
    write(
        "web.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Motif
inputs:
  - {name: port, type: integer, default: 80}
resources:
  services:
    - {port: '{{ .inputs.port }}'}
status:
  fields:
    - {path: image, value: '{{ fullImage }}'}
",
    );
    let katalog = |with: &str| {
        format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  imports:
    - motif: ./notes.yaml
  crds:
    web:
      apiTypes: {{group: a.io, version: v1, kind: Web}}
      operatorBox:
        reconcile:
          imports:
            - {{motif: ./web.yaml, with: {with}}}
        emit:
          status:
            fields:
              - {{path: phase, value: Running}}
"
        )
    };
    let good = write("good.yaml", &katalog("{port: 8080}"));
    let compiled = load(&[good]).unwrap();
    assert!(compiled.katalog.notes.iter().any(|n| n.name == "fullImage"));
    let status = &compiled.crds["web"].crd_box().status_fields;
    let paths: Vec<String> = status.iter().map(|f| f.path.join(".")).collect();
    assert_eq!(paths, ["phase", "image"], "the motif's fields after the CRD's own");

    let bad = write("bad.yaml", &katalog("{port: eighty}"));
    let text = error_text_of(&[bad]);
    assert!(
        text.contains("spec.crds.web.operatorBox.reconcile.imports[0].with.port: the motif's input \"port\" must be of type integer, given \"eighty\""),
        "{text}"
    );
}

#[test]
fn copies_go_only_where_the_katalog_lets_a_custom_resource_place_them() {
    let katalog = r#"
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: spread}
spec:
  crds:
    spread:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Spread, plural: spreads}
      operatorBox:
        runtime:
          allowedNamespaces: [team-a, team-b]
          restrictedNamespaces: []
        reconcile:
          onReconcile:
            configMaps:
              - name: copy
                toNamespaces: ["{{ .spec.targets }}", audit, "{{ .spec.one }}"]
                data: {k: v}
"#;
    let compiled = load_sources(&[(PathBuf::from("spread.yaml"), katalog.to_string())]).unwrap();
    let crd = &compiled.crds["spread"];
    let guard = crd.crd_box();
    let entry = &guard.on_reconcile.as_ref().unwrap().entries[0];
    let placements = |spec: serde_json::Value, own: Option<&str>| {
        let cr = serde_json::json!({"metadata": {"name": "x"}, "spec": spec});
        entry.placements(&orkestra_expr::resolver::Resolver::new(&cr, &[]), own, guard)
    };
    // A list from the spec, a literal, a duplicate and the CR's own namespace.
    assert_eq!(
        placements(
            serde_json::json!({"targets": ["team-a", "team-b"], "one": "home"}),
            Some("home")
        )
        .unwrap(),
        Some(vec![
            "team-a".to_string(),
            "team-b".into(),
            "audit".into(),
            "home".into()
        ])
    );
    // Comma-separated text is a list too; an empty one adds nothing.
    assert_eq!(
        placements(serde_json::json!({"targets": "team-b, team-a", "one": ""}), None).unwrap(),
        Some(vec!["team-b".to_string(), "team-a".into(), "audit".into()])
    );
    // A namespace the CR picked that the Katalog does not allow is refused, by name.
    let refused = placements(serde_json::json!({"targets": ["kube-system"], "one": ""}), Some("home")).unwrap_err();
    assert!(
        refused.to_string().contains("\"kube-system\"") && refused.to_string().contains("allowedNamespaces"),
        "{refused}"
    );
    let bad = placements(serde_json::json!({"targets": ["Not_A_Name"], "one": ""}), None).unwrap_err();
    assert!(bad.to_string().contains("is not a namespace name"), "{bad}");
    let odd = placements(serde_json::json!({"targets": [{"ns": "x"}], "one": ""}), None).unwrap_err();
    assert!(odd.to_string().contains("is not a namespace name"), "{odd}");
}

#[test]
fn a_literal_target_namespace_must_be_a_namespace_name() {
    let katalog = r#"
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: spread}
spec:
  crds:
    spread:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Spread, plural: spreads}
      operatorBox:
        reconcile:
          onReconcile:
            secrets:
              - name: copy
                toNamespaces: [Team_A, 3]
"#;
    let error = load_sources(&[(PathBuf::from("spread.yaml"), katalog.to_string())])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("toNamespaces[0]") && error.contains("\"Team_A\" is not a namespace name"),
        "{error}"
    );
    assert!(
        error.contains("toNamespaces[1]: must be a namespace name or a template"),
        "{error}"
    );
}

#[test]
fn reconciler_profiles_come_from_the_katalog_or_the_built_ins_and_an_unknown_one_is_named() {
    let katalog = |profile: &str| {
        format!(
            r#"
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: tuned}}
profiles:
  reconciler:
    - {{name: batch, description: low churn, workers: 6, resync: 2m, queue: {{failureThreshold: 0.5}}}}
spec:
  crds:
    tuned:
      apiTypes: {{group: demo.orkestra.io, version: v1, kind: Tuned, plural: tuneds}}
      operatorBox:
        reconcile:
          profile: {profile}
          workers: 4
"#
        )
    };
    let load = |profile: &str| load_sources(&[(PathBuf::from("tuned.yaml"), katalog(profile))]);
    let batch = load("batch").unwrap();
    let crd = &batch.crds["tuned"];
    assert_eq!(
        (crd.workers, crd.resync),
        (4, std::time::Duration::from_secs(120)),
        "inline workers win"
    );
    assert_eq!(
        crd.failure_threshold,
        crate::model::FailureThreshold::Rate(0.5),
        "from the user profile"
    );
    let development = load("Development").unwrap();
    assert_eq!(
        development.crds["tuned"].resync,
        std::time::Duration::from_secs(30),
        "names match in any case"
    );
    let error = load("batchy").unwrap_err().to_string();
    assert!(
        error.contains("tuned.yaml:14:20")
            && error.contains("unknown reconciler profile \"batchy\"; the closest is \"batch\""),
        "{error}"
    );
}

#[test]
fn a_cross_read_picks_its_crd_by_labelselector_in_every_box() {
    let katalog = r#"
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: pick}
spec:
  crds:
    app:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: App, plural: apps}
      operatorBox:
        observe:
          cross: [{labelSelector: {tier: data}, as: db, selector: {name: main}}]
      serve:
        target:
          web:
            primary: true
            operatorBox:
              observe:
                cross: [{labelSelector: {tier: cache}, as: cache, selector: {name: main}}]
    database:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Database, plural: databases}
      labelSelector: {tier: data, team: a}
    cache:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Cache, plural: caches}
      labelSelector: {tier: cache}
"#;
    let compiled = load_sources(&[(PathBuf::from("pick.yaml"), katalog.to_string())]).unwrap();
    let app = &compiled.crds["app"];
    let read = &app.crd_box().cross[0];
    assert_eq!((read.crd.as_str(), read.as_.as_str()), ("database", "db"));
    let target = app.targets.get("web").expect("the serve target's box");
    let reads: Vec<&str> = target.cross.iter().map(|r| r.crd.as_str()).collect();
    assert!(reads.contains(&"cache"), "{reads:?}");
}

#[test]
fn a_komposer_composes_its_files_overrides_only_what_it_writes_and_replaces_notes() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    write(
        "shop.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: shop}
spec:
  crds:
    web:
      apiTypes: {group: a.io, version: v1, kind: Web}
      operatorBox:
        reconcile:
          workers: 2
          resync: 30s
          onReconcile:
            configMaps: [{data: {host: '{{ host }}'}}]
    cache:
      apiTypes: {group: a.io, version: v1, kind: Cache}
notes:
  - {name: host, expression: '{{ .metadata.name }}.local'}
  - {name: port, expression: '80'}
",
    );
    write(
        "later.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    cache:
      apiTypes: {group: b.io, version: v1, kind: Cache}
notes:
  - {name: port, expression: '8080'}
",
    );
    let komposer = |extra: &str| {
        write(
            "komposer.yaml",
            &format!(
                "apiVersion: orkestra.orkspace.io/v1
kind: Komposer
metadata: {{name: platform}}
imports:
  files: [./shop.yaml, ./later.yaml]
spec:
  crds:
    - name: web
      workers: 6
    - name: queue
      apiTypes: {{group: a.io, version: v1, kind: Queue}}
notes:
  - {{name: host, expression: '{{{{ .metadata.name }}}}.prod.example'}}
{extra}"
            ),
        )
    };
    let compiled = load(&[komposer("")]).unwrap();
    let katalog = &compiled.katalog;
    assert_eq!(katalog.name, "platform", "the Komposer names the Katalog");
    assert_eq!(katalog.crds.keys().collect::<Vec<_>>(), ["cache", "queue", "web"]);
    let web = katalog.crds["web"].entry.operator_box.reconcile.as_ref().unwrap();
    assert_eq!(web.workers, Some(6), "the override (written flat) wins");
    assert_eq!(web.resync.as_deref(), Some("30s"), "what it does not write stays");
    assert!(web.on_reconcile.is_some(), "the source's templates stay");
    assert_eq!(
        katalog.crds["cache"].entry.api_types.group, "b.io",
        "a later file's CRD replaces"
    );
    let hosts: Vec<&str> = katalog
        .notes
        .iter()
        .filter(|n| n.name == "host")
        .map(|n| n.expression.as_str())
        .collect();
    assert_eq!(
        hosts,
        ["{{ .metadata.name }}.prod.example"],
        "the Komposer's note replaces the file's"
    );

    let text = error_text_of(&[komposer("registry:\n  - {url: ghcr.io/x/y@v1, oci: true}\n")]);
    assert!(text.contains("registry"), "a misplaced key is named: {text}");
    let both = write(
        "both.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Komposer
imports: {files: [./shop.yaml]}
spec:
  crds:
    web: {workers: 6, operatorBox: {reconcile: {workers: 3}}}
",
    );
    let text = error_text_of(&[both]);
    assert!(
        text.contains("set in both the older shape (`workers`)"),
        "an override's conflict is named: {text}"
    );
    let remote = write(
        "remote.yaml",
        "apiVersion: orkestra.orkspace.io/v1\nkind: Komposer\nsources:\n  files: [./missing.yaml]\n  helm: [{repo: https://charts.example, chart: x}]\n",
    );
    let text = error_text_of(&[remote]);
    assert!(
        text.contains("sources.helm: this runtime composes local Katalog files only")
            && text.contains("sources.files[0]: cannot read"),
        "{text}"
    );
}

#[test]
fn a_motif_may_give_resources_by_phase_admission_rules_and_notes_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    write(
        "pipeline.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Motif
resources:
  onCreate:
    jobs: [{name: '{{ .metadata.name }}-build', image: busybox, command: [true]}]
  onDelete:
    configMaps: [{name: '{{ .metadata.name }}-bye', data: {a: b}}]
admission:
  validation:
    - {field: spec.image, operator: exists, message: spec.image is required, action: deny}
notes:
  functions:
    buildName: '{{ .metadata.name }}-build'
    owner: {expression: '{{ .metadata.namespace }}', description: the team}
",
    );
    let katalog = write(
        "k.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    pipeline:
      apiTypes: {group: a.io, version: v1, kind: Pipeline}
      admission:
        validation:
          rules: [{field: spec.steps, operator: exists, message: spec.steps is required, action: deny}]
      operatorBox:
        reconcile:
          imports: [{motif: ./pipeline.yaml}]
          onReconcile:
            configMaps: [{data: {job: '{{ buildName }}'}}]
",
    );
    let compiled = load(&[katalog]).unwrap();
    let entry = &compiled.katalog.crds["pipeline"].entry;
    let reconcile = entry.operator_box.reconcile.as_ref().unwrap();
    assert_eq!(reconcile.on_create.as_ref().unwrap().jobs.len(), 1, "onCreate joined");
    assert_eq!(
        reconcile.on_delete.as_ref().unwrap().config_maps.len(),
        1,
        "onDelete joined"
    );
    assert_eq!(
        reconcile.on_reconcile.as_ref().unwrap().config_maps.len(),
        1,
        "the CRD's own stay"
    );
    let rules: Vec<&str> = entry
        .admission
        .validation
        .as_ref()
        .unwrap()
        .rules
        .iter()
        .map(|r| r.message.as_str())
        .collect();
    assert_eq!(
        rules,
        ["spec.steps is required", "spec.image is required"],
        "the motif's after the CRD's own"
    );
    let notes: Vec<(&str, &str)> = compiled
        .katalog
        .notes
        .iter()
        .map(|n| (n.name.as_str(), n.description.as_str()))
        .collect();
    assert_eq!(notes, [("buildName", ""), ("owner", "the team")]);

    std::fs::write(
        dir.path().join("pipeline.yaml"),
        "apiVersion: orkestra.orkspace.io/v1\nkind: Motif\nnotes: {functions: {x: {expresion: y}}}\n",
    )
    .unwrap();
    let text = error_text_of(&[dir.path().join("k.yaml")]);
    assert!(
        text.contains("unknown field `expresion`"),
        "a misspelt note key is named: {text}"
    );
}

#[test]
fn a_cross_read_may_name_its_crd_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    let write = |kind: &str| {
        std::fs::write(
            &path,
            format!(
                "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    producer:
      apiTypes: {{group: a.io, version: v1, kind: Producer}}
    consumer:
      apiTypes: {{group: a.io, version: v1, kind: Consumer}}
      operatorBox:
        cross:
          - {{kind: {kind}, selector: {{name: '{{{{ .metadata.name }}}}'}}}}
        status:
          fields: [{{path: endpoint, value: '{{{{ .cross.producer.status.endpoint }}}}'}}]
"
            ),
        )
        .unwrap();
    };
    write("Producer");
    let katalog = load(std::slice::from_ref(&path)).unwrap().katalog;
    let reads = &katalog.crds["consumer"]
        .entry
        .operator_box
        .observe
        .as_ref()
        .unwrap()
        .cross;
    assert_eq!(reads[0].crd.as_deref(), Some("producer"));
    write("Database");
    let text = error_text_of(std::slice::from_ref(&path));
    assert!(
        text.contains("cross[0].kind: no CRD of the Katalog has kind Database"),
        "{text}"
    );
}

#[test]
fn a_motif_from_an_oci_registry_is_wanted_until_pulled_then_joins_as_a_file_would() {
    let digest = "d".repeat(64);
    let katalog = |import: &str| format!("        reconcile:\n          imports: [{import}]\n");
    let sources = |operator_box: String| web_katalog(&operator_box);
    let reference = format!("oci://registry.local:5000/motifs/jobs:v1@sha256:{digest}");
    // Both spellings upstream uses: `motif: oci://...` and `oci: ...`.
    for import in [format!("{{motif: '{reference}'}}"), format!("{{oci: '{reference}'}}")] {
        let Err(crate::error::Error::Unpulled { motifs }) = crate::load_sources(&sources(katalog(&import))) else {
            panic!("{import}: an unpulled motif is asked for");
        };
        let wanted: Vec<String> = motifs.iter().map(ToString::to_string).collect();
        assert_eq!(wanted, std::slice::from_ref(&reference));
    }
    let pulled: crate::PulledMotifs = [(
        digest.clone(),
        "apiVersion: orkestra.orkspace.io/v1\nkind: Motif\ninputs: [{name: image, default: busybox}]\nresources:\n  onCreate:\n    jobs: [{name: '{{ .metadata.name }}-build', image: \"{{ index .inputs \\\"image\\\" }}\"}]\n"
            .to_string(),
    )]
    .into();
    let text = katalog(&format!("{{motif: '{reference}', with: {{image: alpine}}}}"));
    let compiled = crate::load_sources_with(&sources(text), &pulled).unwrap();
    let reconcile = compiled.katalog.crds["web"]
        .entry
        .operator_box
        .reconcile
        .clone()
        .unwrap();
    let jobs = &reconcile.on_create.unwrap().jobs;
    assert_eq!(jobs.len(), 1, "the pulled motif's Job joined");
    assert_eq!(jobs[0].inputs.as_ref().unwrap()["image"], "alpine", "with its inputs");

    // Only a digest is trusted: a tag alone is refused by name.
    let unpinned = katalog("{motif: 'oci://registry.local:5000/motifs/jobs:v1'}");
    let Err(crate::error::Error::Invalid { errors, .. }) = crate::load_sources(&sources(unpinned)) else {
        panic!("a motif without a digest is refused");
    };
    let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
    assert!(
        text.contains("spec.crds.web.operatorBox.reconcile.imports[0].motif: oci://registry.local:5000/motifs/jobs:v1: pin the manifest digest"),
        "{text}"
    );
}

#[test]
fn a_condition_s_source_becomes_a_cross_read_of_the_other_runtime_s_metrics() {
    let katalog = web_katalog;
    let status = "        emit:
          status:
            fields:
              - path: busy
                value: 'yes'
                when:
                  - field: cross.db.metrics.queueDepth
                    greaterThan: 10
                    source: {host: 'http://db-runtime:8080', crd: database, cacheFor: 5s}
";
    let compiled = crate::load_sources(&katalog(status)).unwrap();
    let reads = &compiled.crds["web"].crd_box().cross;
    assert_eq!(reads.len(), 1, "one read for the condition");
    let read = format!("{:?}", reads[0]);
    assert!(read.contains("http://db-runtime:8080/katalog/database"), "{read}");
    assert!(read.contains("Metrics"), "{read}");

    let refused = |box_text: &str| {
        let Err(crate::error::Error::Invalid { errors, .. }) = crate::load_sources(&katalog(box_text)) else {
            panic!("refused: {box_text}");
        };
        errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    };
    let gate = "        preReconcile:
          reconcileGate:
            when: [{field: cross.db.metrics.queueDepth, lessThan: 10, source: {host: 'http://db:8080'}}]
";
    let text = refused(gate);
    assert!(text.contains("a gate runs before them"), "{text}");
    let elsewhere = "        emit:
          status:
            fields:
              - {path: x, value: 'y', when: [{field: spec.x, equals: a, source: {host: 'http://db:8080'}}]}
";
    let text = refused(elsewhere);
    assert!(text.contains("its field must read there"), "{text}");
}

/// A Katalog of one CRD, `web`, whose operator box is `operator_box` (indented under it).
fn web_katalog(operator_box: &str) -> Vec<(std::path::PathBuf, String)> {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    web:
      apiTypes: {{group: a.io, version: v1, kind: Web}}
      operatorBox:
{operator_box}"
    );
    vec![(std::path::PathBuf::from("k.yaml"), text)]
}
