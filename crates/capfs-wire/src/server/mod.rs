//! `capfs serve`: a file system behind a WebSocket endpoint.
//!
//! Data flows one way through these files: `listener.rs` accepts (TCP with the HTTP upgrade,
//! its Origin, token and connection-limit checks, the plain HTTP endpoints of `probes.rs`
//! (`/healthz`, `/readyz`, `/metrics` of `metrics.rs`) and the drain at shutdown, or one byte
//! stream such as stdin/stdout with RFC 6455 frames and no HTTP); `connection.rs` runs one connection's read
//! loop on the `transport::link` the client opens too, its in-flight bound and its shutdown
//! drain; `session.rs` applies the handshake rules to each message; `methods.rs` is the method
//! table: each method's row names where it runs, its
//! handler with its typed params, its protocol group and what it does to its paths, and
//! `dispatch` runs a row. The handlers are `file_methods.rs` (the March 2026 methods and capfs's
//! extensions), `codex/` (the methods of the current codex protocol) and `process/handlers.rs`;
//! each returns a `Payload` (`payload.rs`) that `reply.rs` queues for the writer.
//! `state.rs` is what a connection keeps between requests; `stream.rs` carries the data-frame
//! extension; `outgoing.rs` is the server's end of the link's writer, which on TCP reads and
//! writes the data frames of local files itself and encodes large file replies as it writes
//! them (`encoded.rs`), and `stall.rs` its watchdog; `audit.rs` writes
//! one line per request; `config.rs` holds the limits; `threads.rs` runs connections on threads
//! of their own, each with a `current_thread` runtime; `pair.rs` joins a byte-stream connection
//! to a client in the same process.

mod accept;
mod admission;
mod audit;
mod budget;
mod byte_stream;
mod codex;
mod config;
mod connection;
mod encoded;
mod file_methods;
mod fit;
mod frames;
mod listener;
mod methods;
mod metrics;
mod narrow;
mod outgoing;
mod pair;
mod params;
mod payload;
mod probes;
mod process;
mod reply;
mod session;
mod sessions;
mod shared;
mod spin;
mod stall;
mod state;
mod stream;
mod threads;
mod work;

pub use audit::{HANDSHAKE_METHOD, audited};
pub use byte_stream::{serve_byte_stream, serve_stdio};
/// The log [`ServerConfig::with_audit`] writes to: the library's, named here too so that a
/// server's caller finds it beside the config.
pub use capfs::audit::AuditLog;
pub use config::{
    DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_BLOCKING, DEFAULT_MAX_BLOCKING_PER_CONNECTION,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HANDSHAKES, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OUTGOING_BYTES,
    DEFAULT_MAX_OUTGOING_BYTES_PER_CONNECTION, DEFAULT_POLL_BEFORE_SLEEP, DEFAULT_PROCESS_GRACE,
    DEFAULT_SESSION_TTL, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_STREAM_IDLE_TIMEOUT, Readiness,
    ServedProcesses, ServerConfig,
};
pub use listener::Server;
pub use methods::method_names;
pub use pair::{ServingHandle, pair, pair_with_options};
pub use process::{DEFAULT_MAX_PROCESSES, DEFAULT_MAX_PROCESSES_PER_CONNECTION};
/// The protocol state machine without a socket, for the fuzz targets (feature `fuzzing`); not
/// a stable API.
#[cfg(feature = "fuzzing")]
pub use session::Session;
