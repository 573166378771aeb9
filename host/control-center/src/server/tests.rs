use axum::body::Body;
use tower::ServiceExt;

use super::*;

fn app() -> Router {
    let runtimes = Runtimes::new(Vec::new(), None, Tokens::default()).unwrap();
    router(Shared {
        runtimes: Arc::new(runtimes),
        login: Arc::new(Login::password("right".into())),
        refusals: Arc::default(),
    })
}

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A form POST as a page of the Control Center sends it: its Origin, the CSRF cookie
/// and field (`token`: the field; `None` leaves it out).
fn form(path: &str, origin: &str, token: Option<&str>, fields: &str) -> Request {
    let body = match token {
        Some(token) => format!("{fields}&csrf={token}"),
        None => fields.to_string(),
    };
    Request::post(format!("{BASE}{path}"))
        .header(header::HOST, "cc.local:8081")
        .header(header::ORIGIN, origin)
        .header(header::COOKIE, format!("{}={TOKEN}", crate::csrf::COOKIE))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap()
}

async fn sign_in_with(app: Router, password: &str) -> StatusCode {
    let request = form(
        "/login",
        "http://cc.local:8081",
        Some(TOKEN),
        &format!("user=admin&password={password}"),
    );
    app.oneshot(request).await.unwrap().status()
}

#[tokio::test(start_paused = true)]
async fn wrong_passwords_wait_in_line_and_a_right_one_does_not() {
    let app = app();
    let started = tokio::time::Instant::now();
    let (a, b, c) = tokio::join!(
        sign_in_with(app.clone(), "guess-1"),
        sign_in_with(app.clone(), "guess-2"),
        sign_in_with(app.clone(), "guess-3"),
    );
    assert_eq!([a, b, c], [StatusCode::UNAUTHORIZED; 3]);
    assert!(started.elapsed() >= REFUSAL_PAUSE * 3, "{:?}", started.elapsed());

    let started = tokio::time::Instant::now();
    assert_eq!(sign_in_with(app, "right").await, StatusCode::SEE_OTHER);
    assert!(started.elapsed() < REFUSAL_PAUSE);
}

#[tokio::test]
async fn a_form_from_another_site_or_without_the_token_changes_nothing() {
    let runtimes = Arc::new(Runtimes::new(Vec::new(), None, Tokens::default()).unwrap());
    let app = router(Shared {
        runtimes: runtimes.clone(),
        login: Arc::new(Login::none()),
        refusals: Arc::default(),
    });
    let add = "url=http://attacker.example:8080&name=evil&tokenEnv=AWS_SECRET_ACCESS_KEY";
    for (origin, token) in [
        ("http://attacker.example", Some(TOKEN)),
        ("http://cc.local:8081", None),
        (
            "http://cc.local:8081",
            Some("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"),
        ),
    ] {
        let response = app
            .clone()
            .oneshot(form("/runtimes", origin, token, add))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{origin} {token:?}");
    }
    assert!(runtimes.all().is_empty(), "nothing was added");
    // The page's own form gets in, but may name no variable the operator did not allow.
    let response = app
        .clone()
        .oneshot(form("/runtimes", "http://cc.local:8081", Some(TOKEN), add))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    assert!(String::from_utf8_lossy(&page).contains("--allow-token-env"));
    let plain = "url=http://127.0.0.1:9&name=spare";
    let response = app
        .oneshot(form("/runtimes", "http://cc.local:8081", Some(TOKEN), plain))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(runtimes.all().len(), 1);
}

#[tokio::test]
async fn pages_need_a_session_and_say_who_may_frame_them() {
    let response = app()
        .oneshot(Request::get(format!("{BASE}/")).body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.headers()[header::X_FRAME_OPTIONS], "DENY");
    assert!(response.status().is_redirection(), "{}", response.status());
}
