//! What one process's connections share: the policy, the bounds, the connections out, and
//! the audit line each connection writes.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::{EgressNarrowing, EgressPolicy};
use crate::audit::{MAX_ERROR_CHARS, cut, timestamp};

/// How long a connection out may take to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What one process's connections share.
pub(crate) struct Session {
    pub(crate) policy: Arc<EgressPolicy>,
    pub(crate) narrowing: EgressNarrowing,
    pub(crate) pid: u32,
    pub(super) open: Arc<Semaphore>,
    /// Bytes its connections may still carry, both ways.
    pub(super) left: AtomicU64,
    /// The names its DNS responder answered, by the address it gave (transparent TCP).
    pub(super) names: Mutex<Synthetic>,
    /// The ports transparent TCP listens on, which the names it answers must be allowed on.
    pub(super) ports: Vec<u16>,
}

/// The most names one process's DNS responder gives an address to.
const MAX_NAMES: u32 = 4096;

/// The addresses of [`super::SYNTHETIC_RANGE`] given to names, one per name, for one process.
#[derive(Debug, Default)]
pub(crate) struct Synthetic {
    by_name: HashMap<String, Ipv4Addr>,
    by_address: HashMap<Ipv4Addr, String>,
}

impl Synthetic {
    /// The address of `name`, given now if it had none; `None` once [`MAX_NAMES`] are given.
    pub(crate) fn address_of(&mut self, name: &str) -> Option<Ipv4Addr> {
        if let Some(addr) = self.by_name.get(name) {
            return Some(*addr);
        }
        let given = u32::try_from(self.by_name.len()).ok()?;
        if given >= MAX_NAMES {
            return None;
        }
        // From 198.18.0.1 on: never the range's first address.
        let addr = Ipv4Addr::from(u32::from(super::SYNTHETIC_RANGE.0) + 1 + given);
        self.by_name.insert(name.to_string(), addr);
        self.by_address.insert(addr, name.to_string());
        Some(addr)
    }

    /// The name `addr` was given to, if any.
    pub(crate) fn name_of(&self, addr: Ipv4Addr) -> Option<&str> {
        self.by_address.get(&addr).map(String::as_str)
    }
}

impl Session {
    /// Takes `n` bytes from the budget; `false` once it is spent (and from then on).
    pub(crate) fn spend(&self, n: usize) -> bool {
        let taken = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n as u64)
            })
            .is_ok();
        if !taken {
            self.left.store(0, Ordering::Release);
        }
        taken
    }

    pub(super) fn spent(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Connects to the first of `addrs` that answers.
    pub(crate) async fn connect(&self, addrs: &[SocketAddr]) -> Result<TcpStream, String> {
        let mut last = String::from("no address");
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = format!("connecting to {addr}: {e}"),
                Err(_) => last = format!("connecting to {addr}: timed out"),
            }
        }
        Err(last)
    }

    /// Writes the connection's audit line.
    pub(crate) fn record(&self, line: &Line) {
        let Some(audit) = &self.policy.audit else {
            return;
        };
        let reason = line.reason.as_deref().map(|r| cut(r, MAX_ERROR_CHARS));
        audit.write_line(&AuditLine {
            time: timestamp(),
            method: "egress",
            pid: self.pid,
            via: line.via,
            host: cut(&line.host, 300).into_owned(),
            port: line.port,
            address: line.address.map(|a| a.to_string()),
            bytes_out: line.bytes_out.load(Ordering::Relaxed),
            bytes_in: line.bytes_in.load(Ordering::Relaxed),
            outcome: line.outcome,
            reason: reason.map(|r| r.into_owned()),
        });
    }
}

/// What a connection's audit line says.
#[derive(Debug, Default)]
pub(crate) struct Line {
    pub(crate) via: &'static str,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) address: Option<SocketAddr>,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    /// `ok`, `refused` (by the policy or a bound), `failed` (the connection out) or `cut`
    /// (the process closed first).
    pub(crate) outcome: &'static str,
    pub(crate) reason: Option<String>,
}

#[derive(Serialize)]
struct AuditLine {
    time: String,
    method: &'static str,
    pid: u32,
    via: &'static str,
    host: String,
    port: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    #[serde(rename = "bytesOut")]
    bytes_out: u64,
    #[serde(rename = "bytesIn")]
    bytes_in: u64,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}
