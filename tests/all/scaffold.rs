//! `ork component init`, tried as a new author would: a project per language, whose one
//! build command makes the component and whose test reconciles its sample with
//! `ork simulate` (no cluster); an edit that breaks the hook fails that test.

use std::path::Path;
use std::process::Command;

use crate::ork::{ORK, run};

/// Runs the project's `test.sh` with this `ork`: its exit code and everything it said.
fn test_sh(project: &Path) -> (Option<i32>, String) {
    let bin = Path::new(ORK).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new(project.join("test.sh"))
        .env("ORK", ORK)
        .env("PATH", path)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("test.sh runs");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), said)
}

#[test]
fn a_new_project_in_each_language_builds_and_its_test_reconciles_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    for (lang, named) in [
        ("rust", "Rust"),
        ("go", "Go"),
        ("js", "TypeScript"),
        ("python", "Python"),
    ] {
        let project = dir.path().join(format!("hello-{lang}"));
        let made = run(
            &[
                "component",
                "init",
                "--lang",
                lang,
                "greeter",
                "--dir",
                project.to_str().unwrap(),
            ],
            &[],
        );
        let told = String::from_utf8_lossy(&made.stderr);
        assert!(made.status.success(), "{told}");
        assert!(told.contains(&format!("({named}): cd ")), "{told}");
        let (code, said) = test_sh(&project);
        assert_eq!(code, Some(0), "{lang}: {said}");
        assert!(said.contains("ok: the sample reconciles"), "{lang}: {said}");
        // A first build says what it does before it takes its time.
        assert!(said.contains("building build/greeter.wasm ("), "{lang}: {said}");
        let simulated = std::fs::read_to_string(project.join("build/simulated.yaml")).unwrap();
        assert!(simulated.contains("renderedBy: greeter"), "{lang}: {simulated}");
    }
    // A hook that no longer says it rendered fails the project's test.
    let go = dir.path().join("hello-go");
    let main = std::fs::read_to_string(go.join("main.go")).unwrap();
    std::fs::write(
        go.join("main.go"),
        main.replace("\"renderedBy\", \"greeter\"", "\"renderedBy\", \"someone\""),
    )
    .unwrap();
    let (code, said) = test_sh(&go);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("FAIL: no 'renderedBy: greeter'"), "{said}");
}

#[test]
fn init_refuses_a_bad_name_and_a_folder_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let bad = run(&["component", "init", "--lang", "rust", "Not_A_Name"], &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"Not_A_Name\" cannot name a component"));
    let there = run(
        &[
            "component",
            "init",
            "--lang",
            "go",
            "x",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(there.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&there.stderr).contains("exists already; pick another --dir"));
}
