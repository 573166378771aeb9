//! Knowing at once that a replica died, instead of waiting out its Lease. Each replica
//! names the address of its Live API on its Lease (`orkestra.io/peer`); the others knock on
//! that port a few times a second while it holds what they wait for. A port that answered a
//! knock and then refuses one means the process that listened there is gone (killed,
//! crashed): its Lease counts as expired from then. Anything else proves nothing and the
//! Lease's duration decides as before: a timeout, a network that drops packets, and a
//! refusal from a port never reached (a firewall that rejects looks the same as a closed
//! port, so a refusal counts only where a knock got through before).
//!
//! A replica whose Live API stops while it runs stops leading with it (see `ork run`), so a
//! refused knock never meets a live holder.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

/// The annotation naming a replica's Live API on its Lease.
pub const ANNOTATION: &str = "orkestra.io/peer";

/// How often a peer is knocked on.
const KNOCK: Duration = Duration::from_millis(200);

/// The address `lease`'s holder announced, if any.
pub fn address(lease: &Lease) -> Option<SocketAddr> {
    let annotations = lease.metadata.annotations.as_ref()?;
    annotations.get(ANNOTATION)?.parse().ok()
}

/// Names `advertise` on `lease` (or nothing, when this replica has no address to give).
pub fn announce(lease: &mut Lease, advertise: Option<SocketAddr>) {
    let annotations = lease.metadata.annotations.get_or_insert_with(Default::default);
    match advertise {
        Some(addr) => annotations.insert(ANNOTATION.into(), addr.to_string()),
        None => annotations.remove(ANNOTATION),
    };
}

/// The addresses whose knocks got through: only their refusals count.
#[derive(Debug, Default)]
pub struct Knocks(HashSet<SocketAddr>);

impl Knocks {
    /// Whether the process that listened at `addr` is gone: the port answered before and
    /// refuses now.
    async fn gone(&mut self, addr: SocketAddr) -> bool {
        let knock = tokio::time::timeout(KNOCK, tokio::net::TcpStream::connect(addr)).await;
        match knock {
            Ok(Ok(_)) => {
                self.0.insert(addr);
                false
            }
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => self.0.remove(&addr),
            _ => false,
        }
    }
}

/// Knocks on each of `peers` until `within` has passed; the first found gone, if one is.
pub async fn first_gone<T: Clone>(knocks: &mut Knocks, peers: &[(T, SocketAddr)], within: Duration) -> Option<T> {
    let until = tokio::time::Instant::now() + within;
    if peers.is_empty() {
        tokio::time::sleep_until(until).await;
        return None;
    }
    loop {
        for (peer, addr) in peers {
            if knocks.gone(*addr).await {
                return Some(peer.clone());
            }
        }
        let next = tokio::time::Instant::now() + KNOCK;
        if next >= until {
            tokio::time::sleep_until(until).await;
            return None;
        }
        tokio::time::sleep_until(next).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_is_gone_when_its_port_closes_and_a_port_never_reached_proves_nothing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let alive = listener.local_addr().unwrap();
        let never = {
            let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            closed.local_addr().unwrap()
        };
        let within = Duration::from_millis(500);
        let mut knocks = Knocks::default();
        let peers = [("alive", alive), ("never reached", never)];
        assert_eq!(
            first_gone(&mut knocks, &peers, within).await,
            None,
            "a refusal from the start is no death"
        );
        drop(listener);
        let started = std::time::Instant::now();
        assert_eq!(first_gone(&mut knocks, &peers, within).await, Some("alive"));
        assert!(started.elapsed() < within, "found at the first knock");
        assert_eq!(first_gone(&mut knocks, &peers, within).await, None, "said once");
    }

    #[test]
    fn an_announced_address_reads_back_and_a_missing_one_is_none() {
        let mut lease = Lease::default();
        assert_eq!(address(&lease), None);
        let addr: SocketAddr = "10.1.2.3:8080".parse().unwrap();
        announce(&mut lease, Some(addr));
        assert_eq!(address(&lease), Some(addr));
        announce(&mut lease, None);
        assert_eq!(address(&lease), None);
    }
}
