//! `GET /metrics`: what one server counts, in the Prometheus text format (OpenMetrics), every
//! name prefixed `capfs_`. Labels come from fixed sets only: method names from the method
//! table (`unknown` for any other), outcomes from the library's error-kind names, denial
//! reasons from [`Denial`]; never a path or another string a client chose.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::budget::Budget;
use capfs::audit::AuditLog;
use capfs::error::Denial;

/// The label `method` takes for a name the method table does not have.
pub(crate) const UNKNOWN_METHOD: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DenialLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: &'static str,
}

/// Every metric of one server, and the registry that encodes them.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    bytes: Family<DirectionLabels, Counter>,
    connections: Gauge,
    processes_running: Gauge,
    process_starts: Family<RequestLabels, Counter>,
    process_start_seconds: Histogram,
}

/// What is read at each scrape rather than counted: the outgoing budget in use and the audit
/// log's failed writes.
#[derive(Debug)]
struct AtScrape {
    budget: Budget,
    audit: Option<AuditLog>,
}

impl Collector for AtScrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let in_use = ConstGauge::new(self.budget.pool_bytes_in_use() as i64);
        in_use.encode(encoder.encode_descriptor(
            "outgoing_bytes_in_use",
            "Bytes of the server-wide outgoing budget held by replies and data frames not yet written",
            None,
            in_use.metric_type(),
        )?)?;
        let failures = self.audit.as_ref().map_or(0, AuditLog::write_failures);
        let failures = ConstCounter::new(failures);
        failures.encode(encoder.encode_descriptor(
            "audit_write_failures",
            "Audit lines that could not be written",
            None,
            failures.metric_type(),
        )?)?;
        Ok(())
    }
}

impl Metrics {
    pub(crate) fn new(budget: Budget, audit: Option<AuditLog>) -> Self {
        let mut registry = Registry::with_prefix("capfs");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by method and outcome (ok or the error kind)",
            requests.clone(),
        );
        let denials = Family::<DenialLabels, Counter>::default();
        registry.register(
            "denials",
            "Requests refused by the sandbox, by reason",
            denials.clone(),
        );
        let bytes = Family::<DirectionLabels, Counter>::default();
        registry.register(
            "file_bytes",
            "File bytes moved by requests: in (written to the roots) and out (read from them)",
            bytes.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "connections_open",
            "WebSocket connections past their handshake",
            connections.clone(),
        );
        let processes_running = Gauge::default();
        registry.register(
            "processes_running",
            "Processes started and not yet closed",
            processes_running.clone(),
        );
        let process_starts = Family::<RequestLabels, Counter>::default();
        registry.register(
            "process_starts",
            "Process starts, by outcome",
            process_starts.clone(),
        );
        let process_start_seconds = Histogram::new(exponential_buckets(0.000_5, 2.0, 14));
        registry.register(
            "process_start_seconds",
            "Time from a start's request to its process running (or the start failing)",
            process_start_seconds.clone(),
        );
        registry.register_collector(Box::new(AtScrape { budget, audit }));
        Self {
            registry,
            requests,
            denials,
            bytes,
            connections,
            processes_running,
            process_starts,
            process_start_seconds,
        }
    }

    /// Counts a request answered: its method (named by the method table's row, else
    /// [`UNKNOWN_METHOD`]), its outcome (`error`'s kind), the reason of a denial, and the file
    /// bytes it moved, into the roots when `writes`.
    pub(crate) fn request(
        &self,
        method: &'static str,
        writes: bool,
        error: Option<&io::Error>,
        bytes: u64,
    ) {
        let outcome = error.map_or(capfs::audit::OUTCOME_OK, |e| {
            capfs::error::kind_name(e.kind())
        });
        self.requests
            .get_or_create(&RequestLabels { method, outcome })
            .inc();
        if let Some(e) = error.filter(|e| e.kind() == io::ErrorKind::PermissionDenied) {
            let reason = capfs::error::denial(e).map_or("other", denial_reason);
            self.denials.get_or_create(&DenialLabels { reason }).inc();
        }
        if bytes > 0 {
            let direction = if writes { "in" } else { "out" };
            self.bytes
                .get_or_create(&DirectionLabels { direction })
                .inc_by(bytes);
        }
    }

    /// A connection passed its handshake; the guard counts it until dropped.
    pub(crate) fn connection_opened(self: &Arc<Self>) -> OpenConnection {
        self.connections.inc();
        OpenConnection(Arc::clone(self))
    }

    /// A process start ended after `took`, `started` or not.
    pub(crate) fn process_start(&self, started: bool, took: Duration) {
        let outcome = if started { "ok" } else { "failed" };
        let labels = RequestLabels {
            method: crate::protocol::process::PROCESS_START_METHOD,
            outcome,
        };
        self.process_starts.get_or_create(&labels).inc();
        self.process_start_seconds.observe(took.as_secs_f64());
        if started {
            self.processes_running.inc();
        }
    }

    /// A started process closed.
    pub(crate) fn process_closed(&self) {
        self.processes_running.dec();
    }

    /// The text of every metric, as `GET /metrics` answers it.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// The reason label of a denial.
fn denial_reason(denial: Denial) -> &'static str {
    match denial {
        Denial::Escape => "escape",
        Denial::OutsideRoots => "outside_roots",
        Denial::ReadOnlyRoot => "read_only_root",
        Denial::ProtectedRoot => "protected_root",
        _ => "other",
    }
}

/// One open connection, counted until dropped.
pub(crate) struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_fixed_sets() {
        let metrics = Metrics::new(Budget::new(1 << 20, 1 << 20), None);
        let path = capfs::AbsolutePathBuf::new("/etc/passwd").unwrap();
        let denied = capfs::error::outside_roots(&path);
        metrics.request("fs/readFile", false, Some(&denied), 0);
        metrics.request(UNKNOWN_METHOD, false, None, 7);
        let text = metrics.encode();
        assert!(
            text.contains(
                "capfs_requests_total{method=\"fs/readFile\",outcome=\"PermissionDenied\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("capfs_denials_total{reason=\"outside_roots\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("capfs_requests_total{method=\"unknown\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(!text.contains("/etc/"), "{text}");
        assert!(text.contains("capfs_outgoing_bytes_in_use 0"), "{text}");
        assert!(
            text.contains("capfs_audit_write_failures_total 0"),
            "{text}"
        );
    }
}
