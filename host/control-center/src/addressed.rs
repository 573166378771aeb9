//! A runtime named in a page's path by where it is (`/r/127.0.0.1:18080/...`, what a user
//! reads in its URL) is redirected to the name the Control Center gave it
//! (`127-0-0-1-18080`), so a typed path finds it instead of a 404.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::pages::layout::BASE;
use crate::runtimes::Runtimes;

pub async fn redirect(State(runtimes): State<Arc<Runtimes>>, request: Request, next: Next) -> Response {
    if request.method() == Method::GET
        && let Some(to) = canonical(&runtimes, request.uri().path())
    {
        let to = match request.uri().query() {
            Some(query) => format!("{to}?{query}"),
            None => to,
        };
        return Redirect::temporary(&to).into_response();
    }
    next.run(request).await
}

/// The path with the runtime's name in place of its address, when it names one by address.
fn canonical(runtimes: &Runtimes, path: &str) -> Option<String> {
    let rest = path.strip_prefix(BASE)?.strip_prefix("/r/")?;
    let (segment, tail) = rest.split_once('/').map_or((rest, ""), |(s, t)| (s, t));
    let address = percent_encoding::percent_decode_str(segment).decode_utf8().ok()?;
    if runtimes.get(&address).is_some() {
        return None;
    }
    let name = runtimes.named_at(&address)?;
    Some(match tail {
        "" => format!("{BASE}/r/{name}"),
        tail => format!("{BASE}/r/{name}/{tail}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RuntimeConfig;
    use crate::runtimes::Tokens;

    #[test]
    fn a_runtime_named_by_its_address_goes_to_its_name() {
        let watched = RuntimeConfig::new("http://127.0.0.1:18080", None, None).unwrap();
        let runtimes = Runtimes::new(vec![watched], None, Tokens::default()).unwrap();
        let at = |path: &str| canonical(&runtimes, &format!("{BASE}{path}"));
        assert_eq!(
            at("/r/127.0.0.1:18080/crd/website").as_deref(),
            Some("/controlcenter/r/127-0-0-1-18080/crd/website")
        );
        assert_eq!(
            at("/r/127.0.0.1%3A18080").as_deref(),
            Some("/controlcenter/r/127-0-0-1-18080")
        );
        assert_eq!(at("/r/127-0-0-1-18080/crd/website"), None, "already its name");
        assert_eq!(at("/r/10.0.0.9:18080"), None, "no runtime there: the page says so");
        assert_eq!(at("/runtimes"), None);
    }
}
