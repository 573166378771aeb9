//! Network notes: IP addresses and CIDR ranges (v4 and v6).

use std::net::IpAddr;

use serde_json::Value;

use super::args::{Result, exactly, text};
use super::entry::Entry;
use crate::template::env::Env;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "cidrContains",
        func: cidr_contains,
        usage: "cidrContains CIDR IP",
        doc: "IP lies in CIDR (10.0.0.0/8)",
    },
    Entry {
        name: "ipValid",
        func: ip_valid,
        usage: "ipValid IP",
        doc: "IP is a valid v4 or v6 address",
    },
    Entry {
        name: "ipIsPrivate",
        func: ip_is_private,
        usage: "ipIsPrivate IP",
        doc: "IP is private, loopback or link-local",
    },
];

fn ip(text: &str) -> std::result::Result<IpAddr, String> {
    text.trim().parse().map_err(|_| format!("not an IP address: {text:?}"))
}

fn bits(addr: IpAddr) -> (u128, u32) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn cidr_contains(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let cidr = text(args, 0);
    let (net, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| format!("not a CIDR range: {cidr:?}"))?;
    let (net, width) = bits(ip(net)?);
    let prefix: u32 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= width)
        .ok_or_else(|| format!("bad prefix length in {cidr:?}"))?;
    let (addr, addr_width) = bits(ip(&text(args, 1))?);
    if addr_width != width {
        return Ok(Value::Bool(false));
    }
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (width - prefix) & (u128::MAX >> (128 - width))
    };
    Ok(Value::Bool(net & mask == addr & mask))
}

fn ip_valid(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(ip(&text(args, 0)).is_ok()))
}

fn ip_is_private(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let private = match ip(&text(args, 0))? {
        IpAddr::V4(v4) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00 || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    };
    Ok(Value::Bool(private))
}
