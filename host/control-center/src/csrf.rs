//! Cross-site forms, refused. A page on another origin can make a signed-in browser (or any
//! browser, with `--no-login`) submit a form here, and adding a runtime at the attacker's
//! address would send it a runtime token. Every state-changing request (every POST) must
//! come from a page of this Control Center: its `Origin` (or, without one, its `Referer`)
//! names the Host it was sent to, and it carries the token of this browser's CSRF cookie in
//! its `csrf` field (a cookie another origin can neither read nor set, SameSite=Strict).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::RngCore;

use crate::config::BASE;

/// The cookie holding this browser's token.
pub const COOKIE: &str = "ork_cc_csrf";
/// The form field that must repeat it.
pub const FIELD: &str = "csrf";
/// A form is a few fields; past this it is not one of ours.
const FORM_LIMIT: usize = 64 << 10;

/// This browser's token, for the forms a page renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token(pub String);

/// The middleware: checks every POST, and hands pages the token (setting the cookie on a
/// browser's first visit).
pub async fn protect(request: Request, next: Next) -> Response {
    let held = cookie(request.headers(), COOKIE)
        .filter(|t| is_token(t))
        .map(String::from);
    let token = held.clone().unwrap_or_else(new_token);
    let mut request = request;
    if request.method() == Method::POST {
        if !same_origin(request.headers()) {
            return refuse("a form from another site (its Origin is not this Control Center)");
        }
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, FORM_LIMIT).await else {
            return refuse("the form is larger than a form of this Control Center");
        };
        let submitted = form_urlencoded::parse(&bytes)
            .find(|(key, _)| key == FIELD)
            .map(|(_, value)| value.into_owned());
        match (&held, submitted) {
            (Some(held), Some(submitted)) if same(held.as_bytes(), submitted.as_bytes()) => {}
            _ => return refuse("the form's CSRF token is missing or stale: reload the page and try again"),
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    // The cookie is scoped to the Control Center's path: a request elsewhere (a favicon)
    // never carries it, and must not be handed a new one that replaces the pages' token.
    let ours = request.uri().path().starts_with(BASE);
    request.extensions_mut().insert(Token(token.clone()));
    let mut response = next.run(request).await;
    if held.is_none()
        && ours
        && let Ok(value) = format!("{COOKIE}={token}; Path={BASE}; HttpOnly; SameSite=Strict").parse()
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn refuse(why: &str) -> Response {
    (StatusCode::FORBIDDEN, format!("refused: {why}")).into_response()
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether the request's Origin (else Referer) is the Host it was sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(host) = text(header::HOST) else { return false };
    let Some(origin) = text(header::ORIGIN).or_else(|| text(header::REFERER)) else {
        return false;
    };
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default());
    authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// Compares in time that depends on the lengths only.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_a_page_of_this_host_may_post() {
        let host = (header::HOST, "127.0.0.1:8081");
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://127.0.0.1:8081")
        ])));
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::REFERER, "http://127.0.0.1:8081/controlcenter/runtimes")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[host.clone(), (header::ORIGIN, "null")])));
        assert!(!same_origin(&headers(&[host])), "neither Origin nor Referer");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let map = headers(&[(header::COOKIE, "a=1; ork_cc_csrf=abc"), (header::COOKIE, "b=2")]);
        assert_eq!(cookie(&map, COOKIE), Some("abc"));
        assert_eq!(cookie(&map, "b"), Some("2"));
        assert!(is_token(&new_token()) && !is_token("abc"));
    }
}
