//! Katalog loading end to end: the example Katalogs, the invalid corpus with the error text
//! each must produce, the older shape, includes and multi-file merges.

use std::path::{Path, PathBuf};

use super::*;

fn testdata(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/katalog")
        .join(path)
}

fn error_text(path: &Path) -> String {
    match load(&[path.to_path_buf()]) {
        Ok(_) => panic!("{} loaded but must fail", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_example_katalog_loads_without_errors_or_warnings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../katalogs");
    let mut count = 0;
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        let path = entry.path().join("katalog.yaml");
        if !path.exists() {
            continue;
        }
        let katalog = load(std::slice::from_ref(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .katalog;
        assert!(
            katalog.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            katalog.warnings
        );
        for crd in katalog.crds.values() {
            for file in &crd.entry.cr_files {
                assert!(
                    crd.resolve(file).exists(),
                    "{}: sample {file} is missing",
                    path.display()
                );
            }
        }
        count += 1;
    }
    assert!(count >= 5, "at least five example Katalogs, found {count}");
}

#[test]
fn every_invalid_katalog_fails_with_its_expected_text() {
    let dir = testdata("invalid");
    let mut failures = Vec::new();
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        count += 1;
        let expect = std::fs::read_to_string(path.with_extension("expect"))
            .unwrap_or_else(|_| panic!("{} has no .expect", path.display()));
        let text = error_text(&path);
        for wanted in expect.lines().filter(|l| !l.is_empty()) {
            if !text.contains(wanted) {
                failures.push(format!(
                    "{}\n  wanted: {wanted}\n  got:    {}",
                    path.display(),
                    text.replace('\n', "\n          ")
                ));
            }
        }
    }
    assert!(count >= 30, "the corpus shrank: {count} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_flat_shape_is_translated_silently_and_migrate_lists_what_moved() {
    let katalog = load(&[testdata("valid/g2-flat.yaml")]).unwrap().katalog;
    let crd = &katalog.crds["processor"].entry;
    let ob = &crd.operator_box;
    let reconcile = ob.reconcile.as_ref().unwrap();
    assert_eq!(reconcile.workers, Some(2));
    assert_eq!(reconcile.resync.as_deref(), Some("30s"));
    assert_eq!(reconcile.queue.max_depth, 500, "a CRD-level queue moves into reconcile");
    assert_eq!(reconcile.on_create.as_ref().unwrap().deployments.len(), 1);
    assert_eq!(ob.observe.as_ref().unwrap().cross[0].as_.as_deref(), Some("selfHealth"));
    assert_eq!(
        ob.runtime.as_ref().unwrap().autoscale.as_ref().unwrap().do_.workers,
        Some(8)
    );
    assert_eq!(ob.emit.as_ref().unwrap().status.as_ref().unwrap().fields.len(), 2);
    assert_eq!(crd.admission.validation.as_ref().unwrap().rules.len(), 1);
    let gate = ob.pre_reconcile.as_ref().unwrap().reconcile_gate.as_ref().unwrap();
    assert_eq!(
        gate.when[0].field.as_deref(),
        Some("spec.enabled"),
        "a box-level when guards reconciling"
    );
    // Upstream's current examples still write boxes flat: a form, loaded without a word.
    assert!(katalog.warnings.is_empty(), "{:?}", katalog.warnings);
    let text = std::fs::read_to_string(testdata("valid/g2-flat.yaml")).unwrap();
    let changes = crate::migrate::migrate(&text).unwrap().changes.join("\n");
    assert!(changes.contains("written in the flat shape; grouped:"), "{changes}");
    assert!(
        changes.contains("reconciler → reconcile") && changes.contains("status → emit.status"),
        "{changes}"
    );
    assert!(changes.contains("validation → admission.validation"), "{changes}");
}

#[test]
fn includes_merge_under_inline_values_and_lists_append() {
    let katalog = load(&[testdata("valid/with-includes.yaml")]).unwrap().katalog;
    let ob = &katalog.crds["web"].entry.operator_box;
    let reconcile = ob.reconcile.as_ref().unwrap();
    assert_eq!(reconcile.workers, Some(7), "inline wins");
    assert_eq!(reconcile.resync.as_deref(), Some("45s"), "included value fills the gap");
    let fields: Vec<&str> = ob
        .emit
        .as_ref()
        .unwrap()
        .status
        .as_ref()
        .unwrap()
        .fields
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(fields, ["included", "inline"], "included list items come first");
}

#[test]
fn errors_inside_included_files_name_that_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("status.yaml"),
        "fields:\n  - {path: a, value: '{{ .x | nope }}'}\n",
    )
    .unwrap();
    let main = dir.path().join("k.yaml");
    std::fs::write(
        &main,
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {group: a.io, version: v1, kind: Web}\n      operatorBox:\n        emit:\n          status: {include: status.yaml}\n",
    )
    .unwrap();
    let text = error_text(&main);
    assert!(
        text.contains(&format!("{}:2:", dir.path().join("status.yaml").display())),
        "{text}"
    );
    assert!(text.contains("function \"nope\" not defined"), "{text}");
}

#[test]
fn several_files_merge_and_a_crd_declared_twice_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, crd: &str| {
        let path = dir.path().join(name);
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: {name}}}\nspec:\n  crds:\n    {crd}:\n      apiTypes: {{group: a.io, version: v1, kind: K{crd}}}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let (a, b, c) = (write("a", "one"), write("b", "two"), write("c", "one"));
    let katalog = load(&[a.clone(), b]).unwrap().katalog;
    assert_eq!(katalog.name, "a");
    assert_eq!(katalog.crds.keys().collect::<Vec<_>>(), ["one", "two"]);
    let text = error_text_of(&[a.clone(), c]);
    assert!(
        text.contains(&format!("CRD \"one\" is already declared in {}", a.display())),
        "{text}"
    );
}

fn error_text_of(paths: &[PathBuf]) -> String {
    load(paths).map(|_| String::new()).unwrap_or_else(|e| e.to_string())
}

#[test]
fn a_missing_file_and_no_file_are_clear_errors() {
    assert_eq!(
        load(&[PathBuf::from("/nonexistent/katalog.yaml")])
            .unwrap_err()
            .to_string(),
        "cannot read Katalog file /nonexistent/katalog.yaml"
    );
    assert!(load(&[]).unwrap_err().to_string().contains("pass -f KATALOG"));
}

#[test]
fn shadowing_a_builtin_note_warns_unless_declared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    let write = |shadow: bool| {
        std::fs::write(
            &path,
            format!("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nnotes:\n  functions:\n    - {{name: upper, expression: 'x', shadow: {shadow}}}\nspec: {{}}\n"),
        )
        .unwrap();
    };
    write(false);
    let warnings = load(std::slice::from_ref(&path)).unwrap().katalog.warnings;
    assert!(
        warnings[0].message.contains("replaces the built-in function"),
        "{warnings:?}"
    );
    write(true);
    assert!(load(std::slice::from_ref(&path)).unwrap().katalog.warnings.is_empty());
}

#[test]
fn a_deprecated_katalog_warns_and_switched_off_upstream_keys_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    std::fs::write(
        &path,
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
lifecycle:
  maturity: deprecated
  deprecation: {message: replaced by shop-v2, migratedTo: 'oci://registry/shop-v2'}
publish: {tests: {simulate: true}}
spec:
  crds:
    web:
      apiTypes: {group: a.io, version: v1, kind: Web}
      operatorBox:
        runtime: {rollBackOnError: false, ignoreObservedGeneration: true}
",
    )
    .unwrap();
    let warnings = load(std::slice::from_ref(&path)).unwrap().katalog.warnings;
    let texts: Vec<String> = warnings.iter().map(|w| format!("{}: {}", w.path, w.message)).collect();
    assert_eq!(
        texts,
        ["lifecycle: this Katalog is deprecated: replaced by shop-v2; it moved to oci://registry/shop-v2"]
    );
    std::fs::write(
        &path,
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata:\n  name: old\n  deprecation: {message: use shop-v2}\nspec: {}\n",
    )
    .unwrap();
    let warnings = load(std::slice::from_ref(&path)).unwrap().katalog.warnings;
    assert_eq!(warnings[0].path, "metadata.deprecation");
    assert_eq!(warnings[0].message, "this Katalog is deprecated: use shop-v2");
}

#[test]
fn gateway_enabled_false_closes_the_serve_api_and_endpoint_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    let write = |enabled: &str| {
        std::fs::write(
            &path,
            format!("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\ngateway: {{{enabled}endpoint: 'http://gateway:8080', api: {{enabled: true}}}}\nspec: {{}}\n"),
        )
        .unwrap();
        let katalog = load(std::slice::from_ref(&path)).unwrap().katalog;
        assert!(katalog.warnings.is_empty(), "{:?}", katalog.warnings);
        katalog.gateway.unwrap().serve_api_open()
    };
    assert!(write(""), "api.enabled alone opens it");
    assert!(write("enabled: true, "));
    assert!(!write("enabled: false, "), "the gateway's own switch closes it");
}

#[test]
fn dns1123_labels() {
    for ok in ["a", "web-site", "x1"] {
        assert!(is_dns1123_label(ok), "{ok}");
    }
    for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
        assert!(!is_dns1123_label(bad), "{bad}");
    }
}

mod never_panics {
    use proptest::prelude::*;

    use super::*;

    fn example() -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/tiers/katalog.yaml"))
            .unwrap()
    }

    /// Random edits of a real Katalog: deletions, insertions of YAML-significant characters.
    fn mutated() -> impl Strategy<Value = String> {
        let edits = prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0u8..4,
                prop::sample::select(vec![
                    ":", "{", "}", "[", "-", " ", "\n", "'", "{{", "}}", "|", "&a", "*a", "\t", "é",
                ]),
            ),
            1..8,
        );
        edits.prop_map(|edits| {
            let mut text = example();
            for (at, op, piece) in edits {
                let mut i = at.index(text.len().max(1));
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                match op {
                    0 => {
                        let end = (i + 5).min(text.len());
                        let mut end = end;
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(i..end, "");
                    }
                    _ => text.insert_str(i, piece),
                }
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn loading_an_edited_katalog_never_panics(text in mutated()) {
            let _ = load_sources(&[(PathBuf::from("fuzz/katalog.yaml"), text)]);
        }

        #[test]
        fn loading_arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = load_sources(&[(PathBuf::from("fuzz/katalog.yaml"), text)]);
        }
    }
}

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
        refused.contains("\"kube-system\"") && refused.contains("allowedNamespaces"),
        "{refused}"
    );
    let bad = placements(serde_json::json!({"targets": ["Not_A_Name"], "one": ""}), None).unwrap_err();
    assert!(bad.contains("is not a namespace name"), "{bad}");
    let odd = placements(serde_json::json!({"targets": [{"ns": "x"}], "one": ""}), None).unwrap_err();
    assert!(odd.contains("is not a namespace name"), "{odd}");
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
        crate::FailureThreshold::Rate(0.5),
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
