//! A request body held to a pace: it must arrive whole within [`Pace::deadline`], and after
//! [`Pace::grace`] never slower on average than [`Pace::min_rate`]. A peer dripping a body a
//! byte at a time would otherwise hold its connection (and a handler waiting to read) for
//! the whole request deadline; past either bound the body ends in an error, the handler's
//! read fails, and the connection closes. While its body is still arriving, a request's
//! connection counts as receiving, not serving: the door may close it to make room.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// How fast a body must arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The whole body, from the request's headers.
    pub deadline: Duration,
    /// Bytes a second, on average, once `grace` has passed.
    pub min_rate: u64,
    pub grace: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            min_rate: 4 << 10,
            grace: Duration::from_secs(2),
        }
    }
}

/// Why a body was cut off.
#[derive(Debug, thiserror::Error)]
pub enum Slow {
    #[error("the request body did not arrive within {0:?}")]
    Deadline(Duration),
    #[error("the request body arrived slower than {0} bytes a second")]
    Rate(u64),
}

/// Counts a connection's requests whose body is still arriving, while it lives.
pub(crate) struct Receiving(Option<Arc<AtomicUsize>>);

impl Receiving {
    pub(crate) fn start(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(Some(count.clone()))
    }

    fn done(&mut self) {
        if let Some(count) = self.0.take() {
            count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.done();
    }
}

/// `inner`, held to `pace` from `started`.
pub(crate) struct Paced<B> {
    inner: B,
    pace: Pace,
    started: Instant,
    received: u64,
    /// When the body is next too late, if it has not ended by then.
    timer: Pin<Box<Sleep>>,
    receiving: Receiving,
    ended: bool,
}

impl<B> Paced<B> {
    pub(crate) fn new(inner: B, pace: Pace, receiving: Receiving) -> Self {
        let started = Instant::now();
        let mut paced = Self {
            inner,
            pace,
            started,
            received: 0,
            timer: Box::pin(tokio::time::sleep_until(started + pace.deadline)),
            receiving,
            ended: false,
        };
        paced.rearm();
        paced
    }

    /// The time by which more must have arrived: the rate's, or the deadline, whichever is
    /// first.
    fn due(&self) -> Instant {
        let rate = self.pace.min_rate.max(1);
        let at_rate = self.pace.grace + Duration::from_secs_f64(self.received as f64 / rate as f64);
        self.started + at_rate.min(self.pace.deadline)
    }

    fn rearm(&mut self) {
        let due = self.due();
        self.timer.as_mut().reset(due);
    }

    fn slow(&self) -> Slow {
        match self.started.elapsed() >= self.pace.deadline {
            true => Slow::Deadline(self.pace.deadline),
            false => Slow::Rate(self.pace.min_rate),
        }
    }

    fn end(&mut self) {
        self.ended = true;
        self.receiving.done();
    }
}

impl<B> Body for Paced<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    this.rearm();
                }
                if this.inner.is_end_stream() {
                    this.end();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.end();
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let slow = this.slow();
                    this.end();
                    Poll::Ready(Some(Err(Box::new(slow))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    /// A body that yields `chunks`, each after `every`.
    fn dripping(
        chunks: usize,
        every: Duration,
    ) -> http_body_util::StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Unpin> {
        let stream = futures::stream::unfold(0usize, move |sent| async move {
            if sent == chunks {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok(Frame::data(Bytes::from_static(b"x"))), sent + 1))
        });
        http_body_util::StreamBody::new(Box::pin(stream))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_drips_is_cut_at_its_rate_and_a_brisk_one_is_read_whole() {
        let pace = Pace {
            deadline: Duration::from_secs(10),
            min_rate: 100,
            grace: Duration::from_secs(2),
        };
        let receiving = Arc::new(AtomicUsize::new(0));
        // One byte a second: past the grace, behind 100 bytes a second at once.
        let slow = Paced::new(
            dripping(1000, Duration::from_secs(1)),
            pace,
            Receiving::start(&receiving),
        );
        assert_eq!(receiving.load(Ordering::Acquire), 1);
        let started = Instant::now();
        let error = slow.collect().await.expect_err("cut off").to_string();
        assert_eq!(error, "the request body arrived slower than 100 bytes a second");
        assert!(started.elapsed() <= Duration::from_secs(3), "{:?}", started.elapsed());
        assert_eq!(receiving.load(Ordering::Acquire), 0, "no longer receiving");
        // Fast enough, but never done: the deadline.
        let steady = Paced::new(
            dripping(100_000, Duration::from_millis(5)),
            pace,
            Receiving::start(&receiving),
        );
        let error = steady.collect().await.expect_err("cut off").to_string();
        assert_eq!(error, "the request body did not arrive within 10s");
        // A body that keeps the pace arrives whole.
        let brisk = Paced::new(
            dripping(50, Duration::from_millis(20)),
            pace,
            Receiving::start(&receiving),
        );
        let body = brisk.collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 50);
        assert_eq!(receiving.load(Ordering::Acquire), 0);
    }
}
