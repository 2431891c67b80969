//! capfs on the wire: the library's [`ExecutorFileSystem`] served over a codex exec-server
//! compatible JSON-RPC protocol on WebSocket (or JSON lines on stdio), and served again from the
//! other end.
//!
//! - [`server`] serves any `Arc<dyn ExecutorFileSystem>` (and, given one, any
//!   [`ExecutorProcesses`](capfs::process::ExecutorProcesses)).
//! - [`RemoteFileSystem`] and [`RemoteProcesses`] are the same traits as a client of such a
//!   server: the same results and the same `io::ErrorKind`s as the local backend.
//! - [`protocol`] is the wire's types, shared by both ends.
//!
//! The confinement is the library's: the server adds only narrowing (a per-request policy can
//! take access away, never grant it) and bounds on what one client may hold.
//!
//! # Remote
//!
//! A server on a loopback port, and a client that gets the same results and the same
//! `io::ErrorKind`s as the local backend:
//!
//! ```
//! use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
//! use capfs_wire::server::{Server, ServerConfig};
//! use capfs_wire::{RemoteFileSystem, RemoteOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let workspace = tempfile::tempdir()?;
//! let local = LocalFileSystem::new(Sandbox::new().with_root(workspace.path(), Access::ReadWrite)?);
//! let root = local.sandbox().roots()[0].path().clone();
//! // The server serves any `Arc<dyn ExecutorFileSystem>`: a local one here.
//! let server = Server::bind(std::sync::Arc::new(local), ServerConfig::default()).await?;
//! let url = server.url().to_string();
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let serving = tokio::spawn(server.run_until(async { let _ = stopped.await; }));
//!
//! let fs = RemoteFileSystem::connect(&url, RemoteOptions::default()).await?;
//! fs.write_file(&root.join("a.txt")?, b"over the wire".to_vec()).await?;
//! assert_eq!(fs.read_file(&root.join("a.txt")?).await?, b"over the wire");
//! let escape = root.join("../outside")?;
//! assert_eq!(fs.read_file(&escape).await.unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
//!
//! drop(fs);
//! let _ = stop.send(());
//! serving.await.expect("server task")?;
//! # Ok(()) }
//! ```
//!
//! # In one process
//!
//! [`server::pair`] joins a server and a client without a socket, over an in-memory byte
//! stream: the same frames, handshake and methods as on the wire, for tests and embedding. The
//! server ends when the client is dropped:
//!
//! ```
//! use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
//! use capfs_wire::server::{ServerConfig, pair};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let workspace = tempfile::tempdir()?;
//! let local = LocalFileSystem::new(Sandbox::new().with_root(workspace.path(), Access::ReadWrite)?);
//! let root = local.sandbox().roots()[0].path().clone();
//! let (fs, serving) = pair(std::sync::Arc::new(local), ServerConfig::default()).await?;
//! fs.write_file(&root.join("a.txt")?, b"in memory".to_vec()).await?;
//! assert_eq!(fs.read_file(&root.join("a.txt")?).await?, b"in memory");
//! let escape = root.join("../outside")?;
//! assert_eq!(fs.read_file(&escape).await.unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
//!
//! drop(fs);
//! serving.finished().await?;
//! # Ok(()) }
//! ```
//!
//! [`ExecutorFileSystem`]: capfs::ExecutorFileSystem

#![warn(missing_docs, unreachable_pub)]

#[macro_use]
mod setters;

mod encoding;
mod environment;
mod error;
pub mod protocol;
mod remote;
pub mod server;
mod transport;

pub use environment::Environment;
pub use remote::{RemoteFileSystem, RemoteOptions, RemoteProcesses};
