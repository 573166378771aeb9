//! `ork run --ha leader|shard`: how this replica finds its share of the CRs.

use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use orkestra::ha::{self, Ha, Mode};
use orkestra_katalog::model::HaMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    None,
    Leader,
    Shard,
}

#[derive(Debug, Clone, Args)]
pub struct HaArgs {
    /// How replicas share the CRs: `none`, `leader` (one elected replica reconciles, the
    /// others stand by with warm caches) or `shard` (every live replica reconciles its share).
    /// Default: the Katalog's `spec.ha.mode`, else `none`.
    #[arg(long, value_enum, value_name = "MODE")]
    ha: Option<ModeArg>,
    /// Namespace of the Leases (default: the Katalog's `spec.ha.leaseNamespace`, else the
    /// client's namespace: the pod's own in a cluster).
    #[arg(long, value_name = "NAMESPACE", env = "LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity, unique among the replicas (default: the pod name, else
    /// HOSTNAME-PID).
    #[arg(long, value_name = "ID", env = "POD_NAME")]
    identity: Option<String>,
    /// How long a Lease holds unrenewed, e.g. `10s` (default: `spec.ha.leaseDuration`, else 10s).
    #[arg(long, value_name = "DURATION", env = "LEASE_DURATION", value_parser = parse_duration)]
    lease_duration: Option<Duration>,
    /// How often a holder renews and a follower looks, e.g. `2s` (default:
    /// `spec.ha.renewPeriod`, else 2s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    renew_period: Option<Duration>,
    /// At shutdown, how long in-flight reconciles may take before the process exits anyway
    /// (its Leases then expire instead of being released).
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Where the other replicas reach this one's Live API, named on its Lease: they knock
    /// on it and take over as soon as its port is closed (a replica killed outright),
    /// instead of waiting for its Lease to expire. Default: the Live API's address when it
    /// listens on a specific one, else $POD_IP with its port; none without the Live API.
    #[arg(long, value_name = "ADDR")]
    peer_addr: Option<std::net::SocketAddr>,
}

/// One replica, no Leases, whatever the Katalog says (what `ork dev` runs).
impl Default for HaArgs {
    fn default() -> Self {
        Self {
            ha: Some(ModeArg::None),
            lease_namespace: None,
            identity: None,
            lease_duration: None,
            renew_period: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            peer_addr: None,
        }
    }
}

/// Inside a pod's default 30 s termination grace period.
const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(25);

fn parse_duration(text: &str) -> Result<Duration, String> {
    orkestra_expr::duration::parse(text).map_err(String::from)
}

impl HaArgs {
    /// How the replicas share the CRs, by the flag, else the Katalog; `None`: one replica.
    fn mode(&self, katalog: &orkestra_katalog::Compiled) -> Option<Mode> {
        let spec = katalog.katalog.ha.as_ref().map(|h| h.mode);
        let mode = self.ha.unwrap_or(match spec.unwrap_or_default() {
            HaMode::None => ModeArg::None,
            HaMode::Leader => ModeArg::Leader,
            HaMode::Shard => ModeArg::Shard,
        });
        match mode {
            ModeArg::None => None,
            ModeArg::Leader => Some(Mode::Leader),
            ModeArg::Shard => Some(Mode::Shard),
        }
    }

    /// Where the Leases live.
    fn lease_namespace(&self, client: &kube::Client, katalog: &orkestra_katalog::Compiled) -> String {
        let spec = katalog.katalog.ha.as_ref().and_then(|h| h.lease_namespace.clone());
        self.lease_namespace
            .clone()
            .or(spec)
            .unwrap_or_else(|| client.default_namespace().to_string())
    }

    /// The namespace of the Leases this runtime takes, if it takes any.
    pub fn leases(&self, client: &kube::Client, katalog: &orkestra_katalog::Compiled) -> Option<String> {
        self.mode(katalog).map(|_| self.lease_namespace(client, katalog))
    }

    /// Starts the election or the membership the flags and the Katalog ask for; `live` is
    /// where the Live API listens, if it does.
    pub fn start(
        &self,
        client: &kube::Client,
        katalog: &orkestra_katalog::Compiled,
        live: Option<std::net::SocketAddr>,
    ) -> anyhow::Result<Ha> {
        let spec = katalog.katalog.ha.clone().unwrap_or_default();
        let Some(mode) = self.mode(katalog) else {
            return Ok(Ha::none());
        };
        let katalog_duration = |text: &Option<String>| text.as_deref().and_then(|t| parse_duration(t).ok());
        let settings = ha::Settings {
            mode,
            namespace: self.lease_namespace(client, katalog),
            identity: self.identity.clone().unwrap_or_else(default_identity),
            group: katalog.katalog.name.clone(),
            duration: self
                .lease_duration
                .or_else(|| katalog_duration(&spec.lease_duration))
                .unwrap_or(ha::DEFAULT_DURATION),
            renew: self
                .renew_period
                .or_else(|| katalog_duration(&spec.renew_period))
                .unwrap_or(ha::DEFAULT_RENEW),
            advertise: self.peer_addr.or_else(|| live.and_then(peer_address)),
        };
        settings.check().map_err(|why| anyhow::anyhow!("--ha: {why}"))?;
        let lease = match mode {
            Mode::Leader => settings.leader_lease(),
            _ => settings.member_lease(),
        };
        let watched = match settings.advertise {
            Some(addr) => format!("; the others watch {addr}"),
            None => "; no address for the others to watch (--peer-addr)".into(),
        };
        eprintln!(
            "runtime: --ha {} as {:?}: Lease {}/{lease}, duration {:?}, renewed every {:?}{watched}",
            if mode == Mode::Leader { "leader" } else { "shard" },
            settings.identity,
            settings.namespace,
            settings.duration,
            settings.renew
        );
        Ha::start(client.clone(), settings).context("--ha-namespace")
    }
}

/// Where the others reach a Live API listening on `live`: that address when it is a
/// specific one, else the pod's own IP (`POD_IP`) with its port.
fn peer_address(live: std::net::SocketAddr) -> Option<std::net::SocketAddr> {
    if !live.ip().is_unspecified() {
        return Some(live);
    }
    let ip = std::env::var("POD_IP").ok()?.parse().ok()?;
    Some(std::net::SocketAddr::new(ip, live.port()))
}

/// The host name and process id: unique among replicas on one machine as well.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ork".into());
    format!("{host}-{}", std::process::id())
}
