//! The tape of one call: what crosses the host-function boundary, taken down while a call is
//! recorded, or played back to the guest while a recording is replayed. The WASI clocks and
//! random sources, the kube capability and the log all go through it, so nothing inside the
//! guest is instrumented.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rand_core::TryRng;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, Rng, WasiCtxBuilder};

use super::super::capability::Tap;
use super::super::capability::kube::exchange::{KubeAnswer, KubeCall, KubeTap};
use super::super::capability::log::LogTap;
use super::recording::{Exchange, Recording, WasiReads};

/// What a recorded call's tape costs per clock read, in bytes of the recording.
const CLOCK_READ_BYTES: usize = 21;

/// A call's tape, shared by the store's WASI context and its capabilities.
#[derive(Clone)]
pub struct Tape(Arc<Mutex<Reel>>);

enum Reel {
    Taking(Taking),
    Playing(Playing),
}

/// A call being recorded: the real clocks and random sources, each value taken down.
struct Taking {
    reads: WasiReads,
    kube: Vec<Exchange>,
    logs: Vec<String>,
    /// Bytes the recording may still grow by; past them it is given up.
    budget: usize,
    overflowed: bool,
    origin: Instant,
    random: Box<dyn Rng + Send>,
}

/// A recording played back: every value served from it, in order.
struct Playing {
    reads: WasiReads,
    kube: Vec<Exchange>,
    used: Vec<bool>,
    at: Cursors,
    /// The kube calls the guest made this time.
    asked: Vec<KubeCall>,
    /// What the guest read past the end of the recording.
    beyond: Beyond,
}

#[derive(Default)]
struct Cursors {
    wall: usize,
    monotonic: usize,
    random: usize,
    insecure: usize,
}

/// Reads past what the recording holds (a changed guest reading more); each is served the
/// last recorded value (clocks) or zeros (random).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Beyond {
    pub clock_reads: u64,
    pub random_bytes: u64,
}

/// What a recorded call's tape holds at its end.
pub struct Taken {
    pub reads: WasiReads,
    pub kube: Vec<Exchange>,
    pub logs: Vec<String>,
}

/// What a replayed call did against its tape.
pub struct Played {
    pub asked: Vec<KubeCall>,
    pub beyond: Beyond,
}

impl Tape {
    /// A tape that takes down what the call reads, up to `budget` bytes.
    pub fn taking(budget: usize) -> Self {
        let mut random = wasmtime_wasi::thread_rng();
        let seed = (u128::from(random.next_u64()) << 64) | u128::from(random.next_u64());
        Self::new(Reel::Taking(Taking {
            reads: WasiReads {
                insecure_seed: seed.to_string(),
                ..WasiReads::default()
            },
            kube: Vec::new(),
            logs: Vec::new(),
            budget,
            overflowed: false,
            origin: Instant::now(),
            random,
        }))
    }

    /// A tape that plays `recording` back.
    pub fn playing(recording: &Recording) -> Self {
        Self::new(Reel::Playing(Playing {
            reads: recording.wasi.clone(),
            used: vec![false; recording.kube.len()],
            kube: recording.kube.clone(),
            at: Cursors::default(),
            asked: Vec::new(),
            beyond: Beyond::default(),
        }))
    }

    fn new(reel: Reel) -> Self {
        Self(Arc::new(Mutex::new(reel)))
    }

    fn reel(&self) -> parking_lot::MutexGuard<'_, Reel> {
        self.0.lock()
    }

    /// The answer to `call` when playing back (`None` when recording: ask the cluster). A call
    /// the recording holds gets its recorded answer, the same call in the same place first;
    /// one it does not hold is answered `unavailable`.
    pub fn played(&self, call: &KubeCall) -> Option<KubeAnswer> {
        let Reel::Playing(playing) = &mut *self.reel() else {
            return None;
        };
        let place = playing.asked.len();
        playing.asked.push(call.clone());
        let free = |i: &usize| !playing.used[*i] && playing.kube[*i].call == *call;
        let found = Some(place)
            .filter(|i| *i < playing.kube.len() && free(i))
            .or_else(|| (0..playing.kube.len()).find(free));
        Some(match found {
            Some(i) => {
                playing.used[i] = true;
                playing.kube[i].answer.clone()
            }
            None => KubeAnswer::Unavailable("replay: the recording holds no answer to this call".into()),
        })
    }

    /// Takes down a kube call and its answer (recording only).
    pub fn took(&self, call: KubeCall, answer: KubeAnswer) {
        if let Reel::Taking(taking) = &mut *self.reel() {
            let exchange = Exchange { call, answer };
            let size = serde_json::to_string(&exchange).map_or(usize::MAX, |t| t.len());
            if taking.spend(size) {
                taking.kube.push(exchange);
            }
        }
    }

    /// Takes down a line the guest logged (recording only).
    pub fn logged(&self, line: &str) {
        if let Reel::Taking(taking) = &mut *self.reel()
            && taking.spend(line.len() + 3)
        {
            taking.logs.push(line.to_string());
        }
    }

    /// What the tape took down; `None` when the call read more than its budget allowed.
    pub fn taken(&self) -> Option<Taken> {
        match &mut *self.reel() {
            Reel::Taking(taking) if !taking.overflowed => Some(Taken {
                reads: std::mem::take(&mut taking.reads),
                kube: std::mem::take(&mut taking.kube),
                logs: std::mem::take(&mut taking.logs),
            }),
            _ => None,
        }
    }

    /// What a replayed call asked of the tape.
    pub fn played_back(&self) -> Option<Played> {
        match &mut *self.reel() {
            Reel::Playing(playing) => Some(Played {
                asked: std::mem::take(&mut playing.asked),
                beyond: playing.beyond.clone(),
            }),
            Reel::Taking(_) => None,
        }
    }

    fn wall(&self) -> Duration {
        match &mut *self.reel() {
            Reel::Taking(taking) => {
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                if taking.spend(CLOCK_READ_BYTES) {
                    taking.reads.wall.push(now.as_nanos() as u64);
                }
                now
            }
            Reel::Playing(p) => {
                Duration::from_nanos(next_read(&p.reads.wall, &mut p.at.wall, &mut p.beyond.clock_reads))
            }
        }
    }

    fn monotonic(&self) -> u64 {
        match &mut *self.reel() {
            Reel::Taking(taking) => {
                let now = taking.origin.elapsed().as_nanos() as u64;
                if taking.spend(CLOCK_READ_BYTES) {
                    taking.reads.monotonic.push(now);
                }
                now
            }
            Reel::Playing(p) => next_read(&p.reads.monotonic, &mut p.at.monotonic, &mut p.beyond.clock_reads),
        }
    }

    fn fill(&self, secure: bool, bytes: &mut [u8]) {
        match &mut *self.reel() {
            Reel::Taking(taking) => {
                taking.random.fill_bytes(bytes);
                // Base64 in the recording: four bytes of text for three.
                if taking.spend(bytes.len().div_ceil(3) * 4) {
                    let taken = match secure {
                        true => &mut taking.reads.random,
                        false => &mut taking.reads.insecure_random,
                    };
                    taken.extend_from_slice(bytes);
                }
            }
            Reel::Playing(playing) => {
                let (recorded, at) = match secure {
                    true => (&playing.reads.random, &mut playing.at.random),
                    false => (&playing.reads.insecure_random, &mut playing.at.insecure),
                };
                let served = recorded.len().saturating_sub(*at).min(bytes.len());
                bytes[..served].copy_from_slice(&recorded[*at..*at + served]);
                bytes[served..].fill(0);
                *at += served;
                playing.beyond.random_bytes += (bytes.len() - served) as u64;
            }
        }
    }
}

/// A recorded call's kube calls go on the tape; a replay's are answered from it.
impl KubeTap for Tape {
    fn played(&self, call: &KubeCall) -> Option<KubeAnswer> {
        Tape::played(self, call)
    }

    fn took(&self, call: KubeCall, answer: KubeAnswer) {
        Tape::took(self, call, answer);
    }
}

impl LogTap for Tape {
    fn logged(&self, line: &str) {
        Tape::logged(self, line);
    }
}

impl Tap for Tape {
    /// Serves the call's WASI clocks and random sources from this tape.
    fn wire(&self, wasi: &mut WasiCtxBuilder) {
        let seed = match &*self.reel() {
            Reel::Taking(taking) => &taking.reads.insecure_seed,
            Reel::Playing(playing) => &playing.reads.insecure_seed,
        }
        .parse::<u128>()
        .unwrap_or_default();
        wasi.wall_clock(Wall(self.clone()))
            .monotonic_clock(Monotonic(self.clone()))
            .secure_random(Random {
                tape: self.clone(),
                secure: true,
            })
            .insecure_random(Random {
                tape: self.clone(),
                secure: false,
            })
            .insecure_random_seed(seed);
    }
}

impl Taking {
    /// Whether `bytes` more fit the recording; once one does not, nothing more is taken.
    fn spend(&mut self, bytes: usize) -> bool {
        if self.overflowed || bytes > self.budget {
            self.overflowed = true;
            return false;
        }
        self.budget -= bytes;
        true
    }
}

/// The next recorded value of one clock; past the end, its last one again (counted).
fn next_read(values: &[u64], at: &mut usize, beyond: &mut u64) -> u64 {
    match values.get(*at) {
        Some(value) => {
            *at += 1;
            *value
        }
        None => {
            *beyond += 1;
            values.last().copied().unwrap_or_default()
        }
    }
}

struct Wall(Tape);

impl HostWallClock for Wall {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        self.0.wall()
    }
}

struct Monotonic(Tape);

impl HostMonotonicClock for Monotonic {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.monotonic()
    }
}

/// `wasi:random/random` (`secure`) or `wasi:random/insecure`, through the tape.
struct Random {
    tape: Tape,
    secure: bool,
}

impl TryRng for Random {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0; 4];
        self.tape.fill(self.secure, &mut bytes);
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0; 8];
        self.tape.fill(self.secure, &mut bytes);
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, bytes: &mut [u8]) -> Result<(), Infallible> {
        self.tape.fill(self.secure, bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::recording::{CallResult, HookName, LimitsRecord, Recorded, RequestRecord};

    fn recording(reads: WasiReads, kube: Vec<Exchange>) -> Recording {
        Recording {
            format: 1,
            at: String::new(),
            component: Recorded {
                slot: "site".into(),
                world: "hook".into(),
                source: "x.wasm".into(),
                digest: String::new(),
                revision: 1,
                limits: LimitsRecord::from(&orkestra_katalog::component::Limits::default()),
            },
            hook: HookName::Reconcile,
            request: RequestRecord {
                key: "a/b".into(),
                api_version: "v1".into(),
                kind: "Site".into(),
                target: None,
                object: None,
                event_id: None,
                sentinels: vec![],
                context: serde_json::json!({}),
            },
            kube,
            wasi: reads,
            logs: vec![],
            result: CallResult::NoExport,
            secrets_redacted: true,
        }
    }

    fn get(name: &str) -> KubeCall {
        KubeCall::Get {
            object: crate::record::Named {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("a".into()),
                name: name.into(),
            },
        }
    }

    #[test]
    fn what_a_call_read_is_played_back_in_order_then_its_last_value_again() {
        let taking = Tape::taking(1 << 20);
        let (first, second) = (taking.wall(), taking.wall());
        let mono = taking.monotonic();
        let mut random = [0u8; 12];
        taking.fill(true, &mut random);
        taking.took(get("x"), KubeAnswer::NotFound);
        let taken = taking.taken().unwrap();
        assert_eq!(taken.reads.wall.len(), 2);
        assert_eq!(taken.reads.random, random);

        let playing = Tape::playing(&recording(taken.reads, taken.kube));
        assert_eq!((playing.wall(), playing.wall()), (first, second));
        assert_eq!(playing.wall(), second, "past the end: the last value again");
        assert_eq!(playing.monotonic(), mono);
        let mut again = [0u8; 16];
        playing.fill(true, &mut again);
        assert_eq!(again[..12], random);
        assert_eq!(again[12..], [0; 4]);
        assert_eq!(playing.played(&get("x")), Some(KubeAnswer::NotFound));
        assert!(
            matches!(playing.played(&get("x")), Some(KubeAnswer::Unavailable(_))),
            "each answer serves once"
        );
        let played = playing.played_back().unwrap();
        assert_eq!(played.asked, vec![get("x"), get("x")]);
        assert_eq!(
            played.beyond,
            Beyond {
                clock_reads: 1,
                random_bytes: 4
            }
        );
    }

    #[test]
    fn a_call_that_reads_past_its_budget_leaves_no_recording() {
        let taking = Tape::taking(100);
        let mut random = vec![0u8; 1024];
        taking.fill(false, &mut random);
        assert!(taking.taken().is_none());
    }

    #[test]
    fn a_reordered_call_still_gets_its_own_answer() {
        let answer = |n: u64| KubeAnswer::Ok(serde_json::json!(n));
        let kube = vec![
            Exchange {
                call: get("x"),
                answer: answer(1),
            },
            Exchange {
                call: get("y"),
                answer: answer(2),
            },
        ];
        let playing = Tape::playing(&recording(WasiReads::default(), kube));
        assert_eq!(playing.played(&get("y")), Some(answer(2)));
        assert_eq!(playing.played(&get("x")), Some(answer(1)));
        assert_eq!(
            playing
                .played(&KubeCall::Apply {
                    object: serde_json::json!({})
                })
                .map(|a| matches!(a, KubeAnswer::Unavailable(_))),
            Some(true)
        );
    }
}
