//! `ork test --faults` as CI and a user run it: the reduced campaign over every Katalog the
//! project ships (each on a control plane of its own, against the example guests where a
//! Katalog declares one, under failing webhooks where it has admission rules), and a
//! Katalog that breaks an invariant on purpose, which the campaign must name with its
//! reproduction and exit 1.

use std::path::PathBuf;

use crate::ork::run;

fn katalogs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|entry| entry.path().join("katalog.yaml"))
        .filter(|path| path.exists())
        .collect();
    found.sort();
    found
}

/// Builds every example guest a Katalog names (`examples/target/.../<package>.wasm`), as
/// `scripts/guests.sh` does before the tests in CI: on a fresh clone nothing else has yet.
fn build_named_guests(katalogs: &[PathBuf]) {
    for katalog in katalogs {
        let text = std::fs::read_to_string(katalog).unwrap();
        for (_, after) in text.match_indices("examples/target/").map(|(at, _)| text.split_at(at)) {
            let Some(path) = after.split(".wasm").next() else {
                continue;
            };
            let package = path.rsplit('/').next().unwrap_or_default().replace('_', "-");
            orkestra_test_support::guests::component(&package)
                .unwrap_or_else(|e| panic!("{} names guest {package}: {e}", katalog.display()));
        }
    }
}

#[test]
fn every_shipped_katalog_survives_the_reduced_fault_campaign() {
    let katalogs = katalogs();
    build_named_guests(&katalogs);
    let mut args = vec!["test", "--faults", "--reduced"];
    args.extend(katalogs.iter().map(|p| p.to_str().unwrap()));
    // self-service reads its ci token from the environment, as its README says.
    let output = run(&args, &[("ORK_CI_TOKEN", "ci-campaign")]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("violation:"), "{stdout}");
    // Every Katalog with sample CRs ran each fault of the reduced set.
    for katalog in &katalogs {
        let name = katalog.parent().unwrap().file_name().unwrap().to_str().unwrap();
        if stdout.contains(&format!("{}: no sample CRs", katalog.display())) {
            continue;
        }
        for fault in ["baseline", "kill -9 after write 1", "1 in 3 watch events dropped"] {
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")) && l.contains(fault));
            let row = row.unwrap_or_else(|| panic!("no row for {name} under {fault}: {stdout}"));
            assert_eq!(row.matches(" ok ").count(), 6, "{row}");
        }
    }
    // The one Katalog with admission rules ran under failing webhooks too, its sample CR
    // written with kubectl's retries and the runtime's own writes retried.
    let row = stdout
        .lines()
        .find(|l| l.starts_with("self-service ") && l.contains("webhook fails 1 in 2"));
    let row = row.unwrap_or_else(|| panic!("no row for self-service under failing webhooks: {stdout}"));
    assert_eq!(row.matches(" ok ").count(), 6, "{row}");
}

/// A Katalog whose status changes at every reconcile, and which requeues at once: its CRs
/// never settle, and each costs writes for ever. The campaign fails it and says so.
#[test]
fn a_katalog_whose_crs_never_settle_fails_the_campaign_naming_the_cr() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("samples")).unwrap();
    std::fs::write(
        dir.path().join("samples/tick.yaml"),
        "apiVersion: restless.orkestra.io/v1\nkind: Tick\nmetadata: {name: forever}\nspec: {}\n",
    )
    .unwrap();
    let katalog = dir.path().join("katalog.yaml");
    std::fs::write(
        &katalog,
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: restless}
spec:
  crds:
    tick:
      apiTypes: {group: restless.orkestra.io, version: v1, kind: Tick, plural: ticks}
      crFiles: [samples/tick.yaml]
      operatorBox:
        reconcile:
          requeue: {after: 300ms}
        emit:
          status:
            fields:
              - {path: stamp, value: '{{ uuidv4 }}'}
",
    )
    .unwrap();
    let output = run(
        &[
            "test",
            "--faults",
            "--reduced",
            "--timeout",
            "6s",
            katalog.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row = stdout.lines().find(|l| l.contains("baseline")).unwrap_or_default();
    assert!(row.contains("FAIL"), "{stdout}");
    assert!(
        stdout.contains("violation:") && stdout.contains("did not settle within 6s (first: Tick faults-0/forever)"),
        "{stdout}"
    );
}

/// A Katalog that does not load is named with why, fails the campaign, and stops nothing
/// else (here, nothing else was given).
#[test]
fn a_katalog_that_does_not_load_is_named_and_fails_the_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("katalog.yaml");
    std::fs::write(&bad, "kind: Katalog\nspec: {crds: {}}\n").unwrap();
    let output = run(&["test", "--faults", "--reduced", bad.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("error: {}:", bad.display())), "{stderr}");
    assert!(stderr.contains("apiVersion"), "{stderr}");
}
