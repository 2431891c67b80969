//! `capfs serve`: a file system behind a WebSocket endpoint.
//!
//! Data flows one way through these files: `listener.rs` accepts (TCP with the HTTP upgrade,
//! its Origin, token and connection-limit checks and `GET /readyz`, or one byte stream such as
//! stdin/stdout with RFC 6455 frames and no HTTP); `connection.rs` runs one connection's read
//! loop, its in-flight bound and its shutdown drain; `session.rs` applies the handshake rules to
//! each message; `handler.rs` holds the method table and maps a request to trait calls and its result back to
//! the wire (`codex/` for the methods of the current codex protocol, `sessions.rs` for its
//! session ids);
//! `stream.rs` carries the data-frame extension; `outgoing.rs` is the connection's writer, which
//! on TCP reads and writes the data frames of local files itself; `audit.rs` writes one line per
//! request; `config.rs` holds the limits; `threads.rs` runs connections on threads of their own,
//! each with a `current_thread` runtime.

mod admission;
mod audit;
mod budget;
mod byte_stream;
mod codex;
mod config;
mod connection;
mod fit;
mod frames;
mod handler;
mod listener;
mod methods;
mod narrow;
mod outgoing;
mod process;
mod range;
mod reply;
mod session;
mod sessions;
mod stall;
mod stream;
mod threads;
mod work;

pub use audit::{AuditLog, AuditRecord, HANDSHAKE_METHOD, OUTCOME_OK};
pub use byte_stream::{serve_byte_stream, serve_stdio};
pub use config::{
    DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_BLOCKING, DEFAULT_MAX_BLOCKING_PER_CONNECTION,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HANDSHAKES, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OUTGOING_BYTES,
    DEFAULT_MAX_OUTGOING_BYTES_PER_CONNECTION, DEFAULT_SESSION_TTL, DEFAULT_SHUTDOWN_TIMEOUT,
    DEFAULT_STREAM_IDLE_TIMEOUT, ServedProcesses, ServerConfig,
};
pub use listener::Server;
pub use process::{DEFAULT_MAX_PROCESSES, DEFAULT_MAX_PROCESSES_PER_CONNECTION};
/// The protocol state machine without a socket, for the fuzz targets (feature `fuzzing`); not
/// a stable API.
#[cfg(feature = "fuzzing")]
pub use session::Session;
