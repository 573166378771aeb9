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

/// Motifs, copies, profiles, cross reads and Komposer files.
mod composition;

#[test]
fn webhook_intake_entries_are_checked_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    let errors = |webhooks: &str| -> Vec<String> {
        std::fs::write(
            &path,
            format!(
                "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\ngateway:\n  webhooks:\n{webhooks}spec: {{}}\n"
            ),
        )
        .unwrap();
        match load(std::slice::from_ref(&path)) {
            Ok(_) => Vec::new(),
            Err(crate::error::Error::Invalid { errors, .. }) => {
                errors.iter().map(|e| format!("{}: {}", e.path, e.message)).collect()
            }
            Err(other) => panic!("{other}"),
        }
    };
    let good = "    github: [{name: repo, enabled: true, repository: shop/web, branch: release, watch: ['intents/*.yaml'], secretRef: {name: gh, key: secret}, apiUrl: 'http://127.0.0.1:9/api'}]\n    slack: [{name: chat, enabled: true, path: /webhooks/slack, signingSecretRef: {name: s, key: k}, commands: [/deploy]}]\n    generic: [{name: pager, enabled: true, secretRef: {name: p, key: k}}]\n";
    assert_eq!(errors(good), Vec::<String>::new());
    let bad = "    github: [{name: Repo, enabled: true, watch: ['a/['], apiUrl: 'http://example.com'}]\n    gitlab: [{name: lab, path: /hooks/lab, repository: 'a b', watch: [], secretRef: {name: s}}]\n    slack: [{name: chat, path: /webhooks/x, signingSecretRef: {name: s, key: k}, commands: [deploy], responseHosts: ['evil.com/x']}]\n    generic: [{name: chat, path: /webhooks/x}]\n";
    let found = errors(bad);
    for expected in [
        "gateway.webhooks.github[0].name: a webhook needs a DNS-label name",
        "gateway.webhooks.github[0].repository: is required: the repository whose pushes this entry takes",
        "gateway.webhooks.gitlab[0].repository: \"a b\" is neither a GitLab project's numeric id nor its group/project path",
        "gateway.webhooks.github[0].secretRef: is required",
        "gateway.webhooks.github[0].watch: not a glob: \"a/[\"",
        "gateway.webhooks.github[0].apiUrl: \"http://example.com\" must be https://",
        "gateway.webhooks.gitlab[0].path: \"/hooks/lab\" is not a path under /webhooks/",
        "gateway.webhooks.gitlab[0].watch: is required",
        "gateway.webhooks.gitlab[0].secretRef: name and key are required",
        "gateway.webhooks.slack[0].commands[0]: \"deploy\" is not a slash command",
        "gateway.webhooks.slack[0].responseHosts[0]: \"evil.com/x\" is not a host",
        "gateway.webhooks.generic[0].name: a webhook needs a DNS-label name of its own",
        "gateway.webhooks.generic[0].path: /webhooks/x is another webhook's path",
        "gateway.webhooks.generic[0].secretRef: is required",
    ] {
        assert!(
            found.iter().any(|e| e.starts_with(expected)),
            "{expected}\nnot in {found:#?}"
        );
    }
    // A webhook is an identity of its own: not a token's name, and serve.tokens may list it.
    let with_token = "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\ngateway:\n  api: {enabled: true, auth: {tokens: [{name: ci, token: '${CI}'}]}}\n  webhooks:\n    generic: [{name: ci, enabled: true, secretRef: {name: p, key: k}}, {name: pager, enabled: true, secretRef: {name: p, key: k}}]\nspec:\n  crds:\n    site:\n      apiTypes: {group: x.io, version: v1, kind: Site}\n      serve: {enabled: true, namespace: web, tokens: {ci: {permissions: {global: [get]}}, pager: {permissions: {global: [create]}}, nobody: {permissions: {global: [get]}}}}\n";
    std::fs::write(&path, with_token).unwrap();
    let Err(crate::error::Error::Invalid { errors, .. }) = load(std::slice::from_ref(&path)) else {
        panic!("refused")
    };
    let found: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.path, e.message)).collect();
    assert_eq!(
        found,
        [
            "gateway.webhooks.generic[0].name: \"ci\" is a token of gateway.api.auth.tokens too: one name, one identity",
            "spec.crds.site.serve.tokens.nobody: is not a token of gateway.api.auth.tokens or a webhook of gateway.webhooks (did you mean \"ci\"?)",
        ]
    );
    // The older place is read and named as written.
    let older = "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\ngateway:\n  admission:\n    webhooks:\n      generic: [{name: pager, enabled: true}]\nspec: {}\n";
    std::fs::write(&path, older).unwrap();
    let Err(crate::error::Error::Invalid { errors, .. }) = load(std::slice::from_ref(&path)) else {
        panic!("a generic entry without its secret is refused")
    };
    assert_eq!(errors[0].path, "gateway.admission.webhooks.generic[0].secretRef");
}
