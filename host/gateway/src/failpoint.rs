//! A fault a campaign injects into the webhooks of the runtime it tests (`ork test
//! --faults`): with `ORK_FAULT_WEBHOOK=fail:N` one in N of the reviews the API server sends
//! is answered 500, with `late:N` one in N is answered only after the API server stopped
//! waiting for it, as a webhook that crashes or stalls now and then would. Which ones is
//! scattered but the same from run to run: a write takes a review from each webhook (mutate,
//! then validate), so every N-th review could hit the same webhook each time and refuse
//! every write. Only the environment of the process arms it: nothing a Katalog, a CR or a
//! request supplies does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;

/// The variable that arms it.
pub const WEBHOOK: &str = "ORK_FAULT_WEBHOOK";

/// How the webhooks misbehave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// One in `every` reviews answered 500.
    Fail { every: u64 },
    /// One in `every` reviews answered after the webhook's timeout.
    Late { every: u64 },
}

impl Misbehaviour {
    /// `fail:N` or `late:N`, N at least 1.
    pub fn parse(text: &str) -> Option<Self> {
        let (how, every) = text.split_once(':')?;
        let every = every.parse::<u64>().ok().filter(|n| *n > 0)?;
        match how {
            "fail" => Some(Self::Fail { every }),
            "late" => Some(Self::Late { every }),
            _ => None,
        }
    }

    /// Whether the `n`-th review is one to misbehave on (splitmix64 of `n`: scattered, and
    /// the same sequence each run).
    fn hits(self, n: u64) -> bool {
        let every = match self {
            Self::Fail { every } | Self::Late { every } => every,
        };
        let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)).is_multiple_of(every)
    }
}

impl std::fmt::Display for Misbehaviour {
    /// The form [`Misbehaviour::parse`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fail { every } => write!(f, "fail:{every}"),
            Self::Late { every } => write!(f, "late:{every}"),
        }
    }
}

/// `router` as it is, or misbehaving as the environment asks; `timeout` is the one the
/// webhooks are registered with.
pub fn wrap(router: Router, timeout: Duration) -> Router {
    let Ok(text) = std::env::var(WEBHOOK) else {
        return router;
    };
    let Some(misbehaviour) = Misbehaviour::parse(&text) else {
        tracing::warn!(value = %text, "{WEBHOOK} is neither fail:N nor late:N; no fault injected");
        return router;
    };
    tracing::warn!(%misbehaviour, "fault injection armed on the webhooks ({WEBHOOK})");
    let reviews = Arc::new(AtomicU64::new(0));
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let hit = misbehaviour.hits(reviews.fetch_add(1, Ordering::Relaxed));
            async move {
                match (hit, misbehaviour) {
                    (false, _) => next.run(request).await,
                    (true, Misbehaviour::Fail { .. }) => {
                        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "injected fault").into_response()
                    }
                    (true, Misbehaviour::Late { .. }) => {
                        tokio::time::sleep(timeout + Duration::from_secs(1)).await;
                        next.run(request).await
                    }
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_refuses_the_rest() {
        for misbehaviour in [Misbehaviour::Fail { every: 2 }, Misbehaviour::Late { every: 3 }] {
            assert_eq!(Misbehaviour::parse(&misbehaviour.to_string()), Some(misbehaviour));
        }
        for bad in ["fail", "fail:0", "late:x", "slow:2", ""] {
            assert_eq!(Misbehaviour::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn hits_about_one_in_n_and_not_in_step_with_pairs() {
        let fail = Misbehaviour::Fail { every: 2 };
        let hits = (0..1000).filter(|n| fail.hits(*n)).count();
        assert!((400..600).contains(&hits), "{hits} of 1000");
        // Reviews come in pairs (mutate, validate): the second of a pair is not always hit.
        let seconds = (0..500).filter(|k| fail.hits(2 * k + 1)).count();
        assert!((150..350).contains(&seconds), "{seconds} of 500");
        let pairs_through = (0..500).filter(|k| !fail.hits(2 * k) && !fail.hits(2 * k + 1)).count();
        assert!(pairs_through > 50, "{pairs_through} of 500 writes get through");
    }
}
