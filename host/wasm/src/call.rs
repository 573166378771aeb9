//! One call into a component: a fresh store from the pool (or a warm instance, where the
//! component keeps them), the per-call limits (epoch deadline, wall clock, memory, result
//! size, kube budget), the export for the call's kind, the time of each phase, and each way
//! it can fail told apart.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use super::bindings::types::{Outcome, Request, Response};
use super::budget::{Hold, Short};
use super::caller::{Caller, Cluster};
use super::capability;
use super::capability::Tap;
use super::engine::{EPOCH_TICK, SLOT_CALLS, WasmHost};
use super::hook::{CallError, Hook};
use super::limiter::MemoryCap;
use super::load::{Loaded, Pre};
use super::stats::{CallStats, Retired};
use super::store::{Call, CallState};
use super::warm::Idle;
use orkestra_katalog::component::Spec;

/// The instance a call runs on: one kept from an earlier call, or a new one for which the
/// pool holds room.
enum Instance {
    Kept(Idle),
    Fresh(Hold),
}

impl WasmHost {
    /// Runs one export of `loaded`: on a fresh instance, or on a warm one of the caller's
    /// namespace where the spec keeps them. `Ok(None)`: the world has no such export (a
    /// constructor's not-found).
    pub async fn call(
        &self,
        loaded: &Loaded,
        spec: &Spec,
        hook: Hook,
        caller: Caller,
        request: &Request,
        stats: &CallStats,
    ) -> Result<Option<Response>, CallError> {
        self.call_on_tape(loaded, spec, hook, caller, request, stats, None)
            .await
    }

    /// [`WasmHost::call`], its imports taken down on (or served from) `tape` when there is
    /// one. A taped call always runs on a fresh instance and leaves none warm: a replay
    /// starts fresh, so a recording must too.
    #[allow(clippy::too_many_arguments, reason = "call's arguments and the tape")]
    pub(crate) async fn call_on_tape(
        &self,
        loaded: &Loaded,
        spec: &Spec,
        hook: Hook,
        caller: Caller,
        request: &Request,
        stats: &CallStats,
        tape: Option<Arc<dyn Tap>>,
    ) -> Result<Option<Response>, CallError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| CallError::Instantiate("the Wasm host is shutting down".into()))?;
        let tenant = caller.tenant();
        let kept = match (&tape, spec.instances.warm()) {
            (None, Some(_)) => self.warm.take(&loaded.lineage, &tenant, &spec.limits, &spec.files),
            _ => None,
        };
        if let Some(kept) = kept {
            let again = caller.clone();
            let wrote = |caller: &Caller| caller.writes.load(std::sync::atomic::Ordering::Relaxed);
            let before = wrote(&again);
            match self
                .attempt(loaded, spec, (hook, caller, request), stats, Instance::Kept(kept), None)
                .await
            {
                // What a warm instance kept from earlier calls must never fail a call a fresh
                // one would serve: a trap or a memory or fuel limit there is retried at once on
                // a fresh instance, as the requeue would do later. Not a timeout (that used up
                // the call's time), nor what the guest chose to answer (too much, or a denied
                // call), nor a call that already wrote: its writes would happen twice.
                Err(error @ (CallError::Trapped(_) | CallError::MemoryLimit(_) | CallError::Fuel(_)))
                    if wrote(&again) == before =>
                {
                    tracing::debug!(component = %again.component, key = %again.key, %error, "a warm instance failed; retrying on a fresh one");
                    let hold = self.hold(loaded, spec, &again, &tenant).await?;
                    return self
                        .attempt(loaded, spec, (hook, again, request), stats, Instance::Fresh(hold), None)
                        .await;
                }
                answered => return answered,
            }
        }
        let hold = self.hold(loaded, spec, &caller, &tenant).await?;
        self.attempt(
            loaded,
            spec,
            (hook, caller, request),
            stats,
            Instance::Fresh(hold),
            tape,
        )
        .await
    }

    /// Room in the pool for one instance of `loaded` for `tenant`: within the tenant's share
    /// and the component's, giving up kept instances that hold what it needs, else waiting
    /// for room, at most the call's timeout.
    async fn hold(&self, loaded: &Loaded, spec: &Spec, caller: &Caller, tenant: &Arc<str>) -> Result<Hold, CallError> {
        let tenant_share = self.share_of(self.tenants.calls_of(tenant));
        let component_share = self.share_of(SLOT_CALLS);
        let deadline = tokio::time::Instant::now() + spec.limits.timeout;
        loop {
            let freed = self.budget.freed();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let short = match self.budget.try_hold(
                loaded.footprint,
                (tenant, tenant_share),
                (&caller.component, component_share),
            ) {
                Ok(hold) => return Ok(hold),
                Err(short) => short,
            };
            if self.warm.give_up(short, tenant, &caller.component) {
                continue;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                let full = match short {
                    Short::Tenant => format!(
                        "tenant {tenant} holds {} of its share ({tenant_share})",
                        self.budget.held_by(tenant)
                    ),
                    Short::Component => format!("component {} holds its share ({component_share})", caller.component),
                    Short::Pool => format!("the pool holds {} of {}", self.budget.used(), self.budget.total()),
                };
                return Err(CallError::Instantiate(format!(
                    "no room in the engine's pool for an instance ({}) within {:?}: {full}",
                    loaded.footprint, spec.limits.timeout
                )));
            }
        }
    }

    /// One call on a kept instance or a new one.
    async fn attempt(
        &self,
        loaded: &Loaded,
        spec: &Spec,
        (hook, caller, request): (Hook, Caller, &Request),
        stats: &CallStats,
        instance: Instance,
        tape: Option<Arc<dyn Tap>>,
    ) -> Result<Option<Response>, CallError> {
        let limits = spec.limits;
        let started = Instant::now();
        let warm = spec.instances.warm().filter(|_| tape.is_none());
        let (mut store, mut instance, served, hold) = match instance {
            Instance::Kept(idle) => {
                let mut store = idle.store;
                store.data_mut().begin(self.call_of(caller, spec, None));
                (store, Some(idle.instance), idle.calls, idle.hold)
            }
            Instance::Fresh(hold) => {
                let mut store = Store::new(&self.engine, self.state(caller, spec, tape, loaded)?);
                store.limiter(|state| &mut state.memory);
                (store, None, 0, hold)
            }
        };
        stats.instance(served > 0);
        // Unlimited where the component set no limit: its fuel is counted all the same.
        let fuel = limits.fuel.unwrap_or(u64::MAX);
        if self.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| CallError::Instantiate(format!("cannot meter fuel: {e}")))?;
        }
        // Every tick the guest yields to the async runtime, so a guest that computes for its
        // whole timeout delays nobody else; its slice is charged to its tenant's CPU, and a
        // tenant past its share waits out what it owes; past the timeout it traps.
        let deadline = Instant::now() + limits.timeout;
        let (tenant, cpu) = (hold.tenant.clone(), self.cpu.clone());
        let cores = self.tenants.cpu_of(&tenant);
        let clock = store.data().cpu.clone();
        let ticked = clock.clone();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            let now = Instant::now();
            if now >= deadline {
                return Ok(wasmtime::UpdateDeadline::Interrupt);
            }
            let wait = cpu.charge(&tenant, ticked.take(now), cores, now).min(deadline - now);
            let resume = async move {
                match wait.is_zero() {
                    // tokio's own yield: a plain re-poll could be scheduled ahead of everyone
                    // else again (the LIFO slot).
                    true => tokio::task::yield_now().await,
                    false => tokio::time::sleep(wait).await,
                }
            };
            Ok(wasmtime::UpdateDeadline::YieldCustom(1, Box::pin(resume)))
        });
        let mut instantiated = None;
        let run = run(&mut store, &loaded.pre, hook, request, &mut instance, &mut instantiated);
        // Its waits (host calls pending on I/O, sleeps, yields) are not the guest's CPU.
        let run = super::cpu::metered(&clock, run);
        // The epoch stops guest code; the wall clock also stops a guest waiting on the host.
        let finished = tokio::time::timeout(limits.timeout + EPOCH_TICK * 2, run).await;
        let ran = Instant::now();
        if self.fuel {
            stats.observe_fuel(fuel.saturating_sub(store.get_fuel().unwrap_or(fuel)));
        }
        let state = store.data();
        stats.observe_memory(state.memory.used);
        if state.kube.denied.is_some() {
            stats.denied();
        }
        if state.log.dropped > 0 {
            let (component, key) = (&*state.caller.component, &state.caller.key);
            tracing::warn!(
                component,
                key,
                dropped = state.log.dropped,
                "log lines past the component's limits.logBytes were dropped"
            );
        }
        let (hit, max, denied, last_error) = (
            state.memory.hit,
            state.memory.max,
            state.kube.denied.clone(),
            state.log.last_error.clone(),
        );
        let used = state.memory.used;
        // Kept only after a call that ended well: a trap, a timeout or a denial may leave
        // the guest half way through its work.
        let keep = match (warm, instance, &finished) {
            (Some(warm), Some(instance), Ok(Ok(_))) if denied.is_none() => {
                let retire = if served + 1 >= warm.max_calls {
                    Some(Retired::Calls)
                } else if used > warm.high_water {
                    Some(Retired::HighWater)
                } else if capability::files::holds_open(&mut store.data_mut().table, spec.files.len()) {
                    Some(Retired::OpenFiles)
                } else {
                    None
                };
                match retire {
                    Some(reason) => {
                        stats.retired(reason);
                        None
                    }
                    None => Some(instance),
                }
            }
            (Some(_), Some(_), _) => {
                stats.retired(Retired::Failed);
                None
            }
            _ => None,
        };
        match keep {
            // Between calls it holds nothing of the last caller's: no client, no budgets.
            Some(instance) => {
                store.data_mut().end();
                let idle = Idle::new(
                    store,
                    instance,
                    served + 1,
                    (limits, &spec.files),
                    &loaded.lineage,
                    hold,
                );
                self.warm.put(idle);
            }
            // Dropping the store hands its instance back to the pool, then its hold.
            None => {
                drop(store);
                drop(hold);
            }
        }
        if let Some(instantiated) = instantiated {
            stats.observe_phases([instantiated - started, ran - instantiated, ran.elapsed()]);
        }
        let Ok(result) = finished else {
            return Err(CallError::Timeout(limits.timeout));
        };
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                let memory = || {
                    CallError::MemoryLimit(format!(
                        "exceeded its memory limit of {max} bytes (all its memories and tables together)"
                    ))
                };
                return Err(match error.downcast_ref::<wasmtime::Trap>() {
                    _ if hit => memory(),
                    Some(wasmtime::Trap::Interrupt) => CallError::Timeout(limits.timeout),
                    Some(wasmtime::Trap::OutOfFuel) => CallError::Fuel(fuel),
                    Some(wasmtime::Trap::AllocationTooLarge) => memory(),
                    _ => CallError::Trapped(match &last_error {
                        Some(line) => format!("{line} ({})", trap_cause(&error)),
                        None => trap_cause(&error),
                    }),
                });
            }
        };
        let Some(response) = response else {
            return Ok(None);
        };
        // Counts as well as bytes: an empty event or child costs the host a write all the same.
        for (what, count, limit) in [
            ("children", response.resources.len(), limits.children),
            ("events", response.events.len(), limits.events),
        ] {
            if count > limit {
                return Err(CallError::TooMany { what, count, limit });
            }
        }
        let size = response_size(&response);
        if size > limits.result_size {
            return Err(CallError::ResultTooLarge {
                size,
                limit: limits.result_size,
            });
        }
        if let Some(denied) = denied
            && !matches!(response.outcome, Outcome::Error(_))
        {
            // A denial the guest ignored still fails its reconcile: the call did not do what
            // it set out to.
            return Err(CallError::Forbidden(denied));
        }
        Ok(Some(response))
    }

    /// What a call of `caller` may do: its identity towards the cluster (its own, where it
    /// has one, so the cluster's RBAC holds for it too), grants and budgets.
    fn call_of(&self, caller: Caller, spec: &Spec, tape: Option<Arc<dyn Tap>>) -> Call {
        let cluster = self.cluster.clone().map(|cluster| match caller.client.clone() {
            Some(client) => Cluster { client, ..cluster },
            None => cluster,
        });
        Call {
            caller,
            cluster,
            grants: spec.grants.clone(),
            limits: spec.limits,
            tape,
        }
    }

    fn state(
        &self,
        caller: Caller,
        spec: &Spec,
        tape: Option<Arc<dyn Tap>>,
        loaded: &Loaded,
    ) -> Result<CallState, CallError> {
        let mut wasi = capability::files::grant(&spec.files).map_err(CallError::Instantiate)?;
        if let Some(tape) = &tape {
            tape.wire(&mut wasi);
        }
        let memory = MemoryCap::new(spec.limits.memory, loaded.footprint);
        Ok(CallState::new(wasi.build(), memory, self.call_of(caller, spec, tape)))
    }
}

/// Instantiates (unless `instance` holds a warm one) and runs the export for `hook`; `None`
/// where the world has none. `instantiated`: when the instance was ready, if it got one.
async fn run(
    store: &mut Store<CallState>,
    pre: &Pre,
    hook: Hook,
    request: &Request,
    instance: &mut Option<wasmtime::component::Instance>,
    instantiated: &mut Option<Instant>,
) -> wasmtime::Result<Option<Response>> {
    let export = match hook {
        Hook::Reconcile => &pre.reconcile,
        Hook::Delete => &pre.delete,
        Hook::NotFound => match &pre.not_found {
            Some(export) => export,
            None => return Ok(None),
        },
    };
    let ready = match *instance {
        Some(ready) => ready,
        None => *instance.insert(pre.instance.instantiate_async(&mut *store).await?),
    };
    *instantiated = Some(Instant::now());
    let func = ready.get_typed_func::<(&Request,), (Response,)>(&mut *store, export)?;
    let (response,) = func.call_async(&mut *store, (request,)).await?;
    Ok(Some(response))
}

/// Longest description of a trap kept.
const TRAP_LIMIT: usize = 1024;
/// Guest frames named in a trap's description.
const TRAP_FRAMES: usize = 4;

/// What stopped the guest, most telling first: the root cause (the trap, the exit status,
/// the host error), then any context above it, then the innermost guest frames. Bounded.
fn trap_cause(error: &wasmtime::Error) -> String {
    let backtrace = error.downcast_ref::<wasmtime::WasmBacktrace>();
    let shown = backtrace.map(ToString::to_string);
    let mut text = match error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        Some(exit) => format!("it called exit with status {}", exit.0),
        None => error.root_cause().to_string(),
    };
    let root = error.root_cause().to_string();
    for cause in error.chain().map(|c| c.to_string()) {
        if cause != root && Some(&cause) != shown.as_ref() {
            text.push_str("; ");
            text.push_str(&cause);
        }
    }
    if let Some(backtrace) = backtrace {
        // Named frames only: a stripped component's would all read "?".
        let frames: Vec<&str> = backtrace
            .frames()
            .iter()
            .filter_map(|f| f.func_name())
            .take(TRAP_FRAMES)
            .collect();
        if !frames.is_empty() {
            text.push_str(" (in ");
            text.push_str(&frames.join(" <- "));
            text.push(')');
        }
    }
    orkestra_expr::text::bounded(text, TRAP_LIMIT)
}

/// Bytes of what a call returned.
fn response_size(response: &Response) -> usize {
    let outcome = match &response.outcome {
        Outcome::Error(failure) => failure.reason.len() + failure.message.len(),
        _ => 0,
    };
    outcome
        + response.resources.iter().map(String::len).sum::<usize>()
        + response.status.as_ref().map_or(0, String::len)
        + response
            .events
            .iter()
            .map(|e| e.reason.len() + e.message.len())
            .sum::<usize>()
}
