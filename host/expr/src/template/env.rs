//! What a template's evaluation may consult besides its data: the clock, the Katalog's
//! notes and the sentinels of the event being handled. Every library function receives it.

use crate::sentinel::SentinelBits;

use super::Template;

/// What evaluation may consult besides the data: the clock, the user notes and the
/// sentinels of the current event.
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub now: jiff::Timestamp,
    pub notes: &'a [Template],
    pub sentinels: SentinelBits,
}

impl Env<'_> {
    /// An environment at the current time, without notes or sentinels.
    pub fn now() -> Env<'static> {
        Env {
            now: jiff::Timestamp::now(),
            notes: &[],
            sentinels: SentinelBits::default(),
        }
    }
}
