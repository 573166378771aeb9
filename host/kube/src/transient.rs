//! Writes made once at start-up (webhook registrations, token Secrets) that a busy or
//! restarting API server refuses for a moment: a 409 from a racing writer, a 429, a 5xx, a
//! connection dropped. They are tried again for a while instead of ending the process,
//! which in a pod would only come back after a CrashLoopBackOff.

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

/// An error that says whether the API server may well take the request if asked again.
pub trait Transient {
    fn is_transient(&self) -> bool;
}

impl Transient for kube::Error {
    fn is_transient(&self) -> bool {
        match self {
            kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500 | 502 | 503 | 504),
            kube::Error::HyperError(_) | kube::Error::Service(_) => true,
            _ => false,
        }
    }
}

/// `call` until it succeeds, fails for good, or has failed transiently 8 times (about 10 s
/// of backoff, from 100 ms, doubling, at most 2 s apart); `what` names it in the log.
pub async fn retry<T, E, F, Fut>(what: &str, call: F) -> Result<T, E>
where
    E: Transient + std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(8)
        .with_jitter();
    call.retry(backoff)
        .when(E::is_transient)
        .notify(|error, after| tracing::info!(%error, ?after, "{what}: the API server refused for now; trying again"))
        .await
}

/// The error kube reports for an API server's answer of `code`, for tests of what is
/// done with one.
#[cfg(any(test, feature = "testing"))]
pub fn refusal(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(&format!("status {code}"), "Test")
            .with_code(code)
            .boxed(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_throttles_and_server_errors_are_transient_refusals_are_not() {
        for code in [409, 429, 500, 503, 504] {
            assert!(refusal(code).is_transient(), "{code}");
        }
        for code in [400, 401, 403, 404, 422] {
            assert!(!refusal(code).is_transient(), "{code}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_refusal_is_asked_again_a_final_one_is_not() {
        let mut calls = 0;
        let got = retry("test", || {
            calls += 1;
            let attempt = calls;
            async move {
                match attempt {
                    1 | 2 => Err(refusal(409)),
                    _ => Ok(attempt),
                }
            }
        })
        .await;
        assert_eq!(got.unwrap(), 3);

        let mut calls = 0;
        let got: Result<(), kube::Error> = retry("test", || {
            calls += 1;
            async { Err(refusal(403)) }
        })
        .await;
        assert!(got.is_err());
        assert_eq!(calls, 1, "a refusal is final");

        let mut calls = 0;
        let got: Result<(), kube::Error> = retry("test", || {
            calls += 1;
            async { Err(refusal(503)) }
        })
        .await;
        assert!(got.is_err());
        assert_eq!(calls, 9, "the first call and 8 more");
    }
}
