//! capfs: a file system an AI agent's tools cannot escape.
//!
//! Every operation goes through one async trait, [`ExecutorFileSystem`]. [`LocalFileSystem`]
//! serves it with cap-std directory handles opened once on the [`Sandbox`] roots: no operation
//! reaches a file outside the roots, not by `..`, absolute paths, symlinks or racing renames.
//! [`RemoteFileSystem`] serves the same trait from a `capfs serve` on another host (or this
//! one), over a codex exec-server compatible JSON-RPC protocol on WebSocket; [`server`] is that
//! server, and it can serve any `ExecutorFileSystem`.
//!
//! # Local
//!
//! ```
//! use capfs::{AbsolutePathBuf, Access, CopyOptions, ExecutorFileSystem, LocalFileSystem, Sandbox};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let workspace = tempfile::tempdir()?;
//! let fs = LocalFileSystem::new(Sandbox::new().with_root(workspace.path(), Access::ReadWrite)?);
//! let root = fs.sandbox().roots()[0].path().clone();
//!
//! fs.write_file(&root.join("a.txt")?, b"hello".to_vec()).await?;
//! fs.copy(&root.join("a.txt")?, &root.join("b.txt")?, CopyOptions::default()).await?;
//! assert_eq!(fs.read_file(&root.join("b.txt")?).await?, b"hello");
//!
//! // `..` cannot climb out of the root.
//! let escape = root.join("../../etc/passwd")?;
//! assert_eq!(fs.read_file(&escape).await.unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
//! # Ok(()) }
//! ```
//!
//! # Remote
//!
//! A server on a loopback port, and a client that gets the same results and the same
//! `io::ErrorKind`s as the local backend:
//!
//! ```
//! use capfs::server::{Server, ServerConfig};
//! use capfs::{Access, ExecutorFileSystem, LocalFileSystem, RemoteFileSystem, RemoteOptions, Sandbox};
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
//! # Semantics
//!
//! | operation | behaviour |
//! |---|---|
//! | `read_file` | a whole regular file, at most the read limit ([`DEFAULT_READ_LIMIT`]); special files are refused without blocking |
//! | `read_file_to` | the same file streamed into an `AsyncWrite` with bounded memory, not bound by the read limit |
//! | `write_file_from` | `write_file` from an `AsyncRead` with bounded memory: exactly `size` bytes or (`None`) up to its end, with [`WriteOptions`]; a reader that fails or ends early leaves the file as it was |
//! | `write_file` | atomic: a temporary file in the same directory, renamed over the target; a symlink at the path is followed inside the root |
//! | `create_directory` | `recursive` creates parents and accepts an existing directory |
//! | `get_metadata` | follows symlinks inside the root; `is_symlink` tells whether the path itself is a link |
//! | `read_directory` | one entry per name; links are listed, not followed |
//! | `remove` | `recursive` for directories, `force` ignores `NotFound`; a root is never removed |
//! | `copy` | files atomically, symlinks as links, trees with `recursive` (to [`COPY_DEPTH_LIMIT`] levels) |
//! | `rename` | atomic, within one root; a root is never moved or replaced |
//!
//! Every path under no root, every escape and every mutation under a read-only root fails with
//! `PermissionDenied` and changes nothing. The threat model, each guarantee and the test that
//! holds it are in the repository's `SECURITY.md`; the layers and mechanisms in
//! `docs/DESIGN.md`.

#![warn(missing_docs, unreachable_pub)]

pub mod artifact;
mod environment;
pub mod error;
mod file_system;
mod local;
mod path;
pub mod process;
pub mod protocol;
mod remote;
mod sandbox;
pub mod server;
pub mod terminal;
mod transport;
mod walk;

pub use environment::Environment;
pub use file_system::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, FileSystemResult,
    ReadDirectoryEntry, RemoveOptions, RenameOptions, WALK_BYTES_LIMIT, WALK_DEPTH_LIMIT,
    WALK_ENTRY_LIMIT, Walk, WalkEntry, WalkError, WalkOptions, WriteOptions,
};
pub use local::{COPY_DEPTH_LIMIT, DEFAULT_READ_LIMIT, LocalFileSystem, Narrowed, Narrowing};
pub use path::AbsolutePathBuf;
pub use process::{LocalProcesses, ProcessPolicy};
pub use remote::{RemoteFileSystem, RemoteOptions, RemoteProcesses};
pub use sandbox::{Access, Root, Sandbox};

/// The README's examples, compiled and run as doctests so they never rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
