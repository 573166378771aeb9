//! `ork token list|verify|probe` and `ork serve validate|targets|can-i`, as a platform team
//! uses them on the self-service example: offline from the Katalog, against the real API
//! server for token Secrets, an OIDC issuer for OIDC tokens, and a running `ork gateway`.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use orkestra_test_support::namespace;
use orkestra_test_support::oidc::TestIssuer;
use serde_json::json;

use crate::ork::run;

fn self_service() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/self-service/katalog.yaml")
}

/// `ork ARGS` with `env`: exit code and all it said.
fn ork(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = run(args, env);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), said)
}

#[test]
fn the_serve_settings_read_offline_name_each_target_token_and_verdict() {
    let katalog = self_service();
    let katalog = katalog.to_str().unwrap();
    let offline = [("KUBECONFIG", "/nonexistent/kubeconfig")];
    let (code, said) = ork(&["token", "list", "-f", katalog], &offline);
    assert_eq!(code, Some(0), "{said}");
    for expected in [
        "platform\n  from: Secret <gateway namespace>/self-service-platform-token (key token)",
        "ci\n  from: environment ORK_CI_TOKEN",
        "site (CRD list): schema get,list; resources create,update,get,list in default",
        "preview (target list): not listed, so refused",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said}");
    }
    let (code, said) = ork(&["serve", "validate", "-f", katalog], &offline);
    assert_eq!(
        (
            code,
            said.contains("serve: 1 served CRD(s), 2 target(s), 2 token(s)\nok")
        ),
        (Some(0), true),
        "{said}"
    );
    let (code, said) = ork(&["serve", "targets", "-f", katalog], &offline);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.lines().any(|l| l.starts_with("site ")
            && l.contains("true")
            && l.contains("target,cr")
            && l.ends_with("ci,platform")),
        "{said}"
    );
    // ci may create in default through both targets, not delete, not elsewhere.
    let can_i = |op: &str, ns: &str| {
        ork(
            &["serve", "can-i", "-f", katalog, "--token", "ci", "-o", op, "-N", ns],
            &offline,
        )
    };
    let (code, said) = can_i("create", "default");
    assert_eq!((code, said.as_str()), (Some(0), "preview: yes\nsite: yes\n"));
    let (code, said) = can_i("delete", "default");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("site: no: token \"ci\" may not delete resources of target \"site\""),
        "{said}"
    );
    let (code, said) = can_i("create", "other");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("may not use namespace \"other\" (allowed: default)"),
        "{said}"
    );
    let (code, said) = ork(
        &["serve", "can-i", "-f", katalog, "--token", "nobody", "-o", "get"],
        &offline,
    );
    assert_eq!(code, Some(1));
    assert!(
        said.contains("--token \"nobody\": no such entry in gateway.api.auth.tokens"),
        "{said}"
    );

    // CRDs served with the API closed: no call could reach them.
    let dir = tempfile::tempdir().unwrap();
    let closed = dir.path().join("katalog.yaml");
    let text = std::fs::read_to_string(self_service())
        .unwrap()
        .replace("    enabled: true\n    auth:", "    enabled: false\n    auth:");
    std::fs::write(&closed, text).unwrap();
    let (code, said) = ork(&["serve", "validate", "-f", closed.to_str().unwrap()], &offline);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(
            "error: CRDs are served (serve.enabled) but neither the Serve API (gateway.api.enabled) nor webhook intake (gateway.webhooks) is open"
        ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_verified_against_its_entry_and_probed_against_a_running_gateway() {
    let ns = namespace("token").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let katalog = self_service();
    let katalog = katalog.to_str().unwrap();
    let verify = |bearer: &str, env: &[(&str, &str)]| {
        let mut all = vec![("KUBECONFIG", kubeconfig), ("ORK_GATEWAY_TOKEN", bearer)];
        all.extend_from_slice(env);
        ork(
            &["token", "verify", "-f", katalog, "--gateway-namespace", &ns.name],
            &all,
        )
    };
    // A static token from the environment.
    let (code, said) = verify("ci-secret-1", &[("ORK_CI_TOKEN", "ci-secret-1")]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("accepted by token entry \"ci\" (environment ORK_CI_TOKEN)"),
        "{said}"
    );
    // One from its Secret, read (the Secret is not made when missing).
    let (code, said) = verify("platform-1", &[("ORK_CI_TOKEN", "ci-secret-1")]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("refused: no token entry accepts it"), "{said}");
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(
        secrets.get_opt("self-service-platform-token").await.unwrap().is_none(),
        "verify made nothing"
    );
    let secret = json!({"metadata": {"name": "self-service-platform-token"}, "stringData": {"token": "platform-1"}});
    secrets
        .create(&PostParams::default(), &serde_json::from_value(secret).unwrap())
        .await
        .unwrap();
    let (code, said) = verify("platform-1", &[("ORK_CI_TOKEN", "ci-secret-1")]);
    assert_eq!(code, Some(0), "{said}");
    // The namespace it was told, not a placeholder.
    assert!(
        said.contains(&format!(
            "accepted by token entry \"platform\" (Secret {}/self-service-platform-token (key token)",
            ns.name
        )),
        "{said}"
    );

    // An OIDC token, verified against its issuer's keys; a wrong audience is refused.
    let issuer = TestIssuer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let oidc = dir.path().join("katalog.yaml");
    let text = std::fs::read_to_string(self_service()).unwrap().replace(
        "        - name: ci\n          token: \"${ORK_CI_TOKEN}\"",
        &format!(
            "        - name: ci\n          oidc: {{issuer: '{}', audience: orkestra}}",
            issuer.url()
        ),
    );
    std::fs::write(&oidc, text).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let claims =
        json!({"iss": issuer.url(), "sub": "repo:shop/web:ref:refs/heads/main", "aud": "orkestra", "exp": now + 300});
    let oidc_verify = |bearer: String| {
        let env = [("KUBECONFIG", kubeconfig), ("ORK_GATEWAY_TOKEN", bearer.as_str())];
        ork(
            &[
                "token",
                "verify",
                "-f",
                oidc.to_str().unwrap(),
                "--gateway-namespace",
                &ns.name,
            ],
            &env,
        )
    };
    let (code, said) = tokio::task::block_in_place(|| oidc_verify(issuer.sign(&claims)));
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("accepted by token entry \"ci\" (OIDC): subject repo:shop/web:ref:refs/heads/main"),
        "{said}"
    );
    let mut wrong = claims.clone();
    wrong["aud"] = json!("elsewhere");
    let (code, said) = tokio::task::block_in_place(|| oidc_verify(issuer.sign(&wrong)));
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("OIDC: "), "{said}");

    // A running gateway asked with each token: the example's Serve API under a name of its
    // own and without its webhooks, which another test registers for the example.
    let text = std::fs::read_to_string(self_service())
        .unwrap()
        .replace("  name: self-service\n", &format!("  name: {}\n", ns.name))
        .replace("security:\n  webhooks:\n    admission: {enabled: true}\n", "");
    let (_served_dir, served) = crate::running::katalog_file(&ns, &text).await;
    let (_gateway, url) = crate::gateway::spawn_gateway(&served, &ns.name, &[("ORK_CI_TOKEN", "ci-secret-1")]);
    let probe = |bearer: &str| ork(&["token", "probe", "--gateway", &url], &[("ORK_GATEWAY_TOKEN", bearer)]);
    let (code, said) = tokio::task::block_in_place(|| probe("ci-secret-1"));
    assert_eq!(code, Some(0), "{said}");
    // Its schema list covers site only: preview grants it no list.
    assert!(
        said.contains(&format!(
            "accepted by the gateway of Katalog {:?}: it may see 1 target(s): site",
            ns.name
        )),
        "{said}"
    );
    // Asked for another Katalog, the gateway that answers is named and the probe fails.
    let (code, said) = tokio::task::block_in_place(|| {
        ork(
            &["token", "probe", "--gateway", &url, "--katalog", "self-service"],
            &[("ORK_GATEWAY_TOKEN", "ci-secret-1")],
        )
    });
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("serves Katalog {:?}, not \"self-service\"", ns.name)),
        "{said}"
    );
    let (code, said) = tokio::task::block_in_place(|| probe("not-a-token"));
    assert_eq!(code, Some(1), "{said}");
    assert!(said.starts_with("refused (401)"), "{said}");
    // A URL that is not the Serve API is said to be one, not a refusal of the token.
    let base = url.trim_end_matches("/api/v1").to_string();
    let (code, said) = tokio::task::block_in_place(|| {
        ork(
            &["token", "probe", "--gateway", &base],
            &[("ORK_GATEWAY_TOKEN", "ci-secret-1")],
        )
    });
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.starts_with(&format!("no Serve API at {base}/schema (404)")),
        "{said}"
    );
}
