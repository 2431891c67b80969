//! capfs: a file system an AI agent's tools cannot escape.
//!
//! Every operation goes through one async trait, [`ExecutorFileSystem`]. [`LocalFileSystem`]
//! serves it with cap-std directory handles opened once on the [`Sandbox`] roots: no operation
//! reaches a file outside the roots, not by `..`, absolute paths, symlinks or racing renames.
//! [`LocalProcesses`] runs commands confined to the same roots. The crate `capfs-wire` serves any
//! `ExecutorFileSystem` over a codex exec-server compatible JSON-RPC protocol and implements the
//! trait again as a client of such a server; this crate knows nothing of the wire.
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
//! # Semantics
//!
//! This is the one table of what each operation does; the README, the protocol document and
//! the design document link here.
//!
//! | operation | behaviour | errors |
//! |---|---|---|
//! | `read_file` | a whole regular file, at most the read limit ([`DEFAULT_READ_LIMIT`], 512 MiB); special files are refused without blocking | `NotFound`; `IsADirectory`; `InvalidInput` for a FIFO, socket or device and for `file is too large to read: limit is N bytes` |
//! | `read_file_to` | the same file streamed into an `AsyncWrite` with bounded memory, not bound by the read limit | those of `read_file` but the limit |
//! | `write_file` | atomic: a temporary file in the same directory, renamed over the target; a symlink at the path is followed to its target inside the root; an existing file keeps its permission bits | `NotFound` (no parent); `IsADirectory`; `PermissionDenied` when a link leads out |
//! | `write_file_from` | `write_file` from an `AsyncRead` with bounded memory: exactly `size` bytes or (`None`) up to its end, with [`WriteOptions`]; a reader that fails or ends early leaves the file as it was | those of `write_file`; `UnexpectedEof` when the reader ends before `size` bytes, `InvalidInput` when it holds more |
//! | `create_directory` | `recursive` creates parents and accepts an existing directory | `AlreadyExists`; `NotFound` |
//! | `get_metadata` | type, size, times; follows symlinks inside the root; `is_symlink` tells whether the path itself is a link | `NotFound` |
//! | `read_directory` | one entry per name, readdir order; links are listed (dangling or escaping ones too), never followed | `NotFound`; `NotADirectory` |
//! | `remove` | `recursive` for directories (any depth, with two directory handles), `force` ignores `NotFound`; a symlink is removed as a link; a root is never removed | `DirectoryNotEmpty`; `NotFound`; `PermissionDenied` for a root |
//! | `copy` | files atomically, symlinks as links with the same text, trees with `recursive` (to [`COPY_DEPTH_LIMIT`] levels, then `InvalidInput`); special files inside a tree are skipped | `InvalidInput` with the fixed messages of [`error`]: [`error::COPY_DIRECTORY_NEEDS_RECURSIVE`], [`error::COPY_INTO_ITSELF`], [`error::COPY_UNSUPPORTED_TYPE`], [`error::COPY_ONTO_ITSELF`] |
//! | `rename` | atomic, within one root; `overwrite: false` refuses an existing destination; a root is never moved or replaced | `AlreadyExists`; `CrossesDevices` between roots; `PermissionDenied` for a root |
//!
//! Every path under no root, every escape and every mutation under a read-only root fails with
//! `PermissionDenied` and changes nothing; [`error::denial`] says which of those rules it was.
//! Paths are [`AbsolutePathBuf`]: absolute, normalised lexically (`/ws/a/../b` is `/ws/b`),
//! without NUL bytes. Only UTF-8 paths cross the wire: the remote backend refuses any other path
//! with `InvalidInput` before sending anything (the local backend takes it). A listed name that
//! is not UTF-8 is marked `lossy_name` by the local backend and left out of remote listings
//! (counted in `nonUtf8NamesOmitted`), so a listed name always leads to its own entry. A root is
//! addressed by its canonical path (`--root ./ws` serves `$(realpath ./ws)`). Absolute symlink
//! texts are followed when they name a place inside the same root.
//!
//! The threat model, each guarantee and the test that holds it are in the repository's
//! `SECURITY.md`; the layers and mechanisms in `docs/DESIGN.md`; the wire protocol in
//! `docs/protocol.md`.

#![warn(missing_docs, unreachable_pub)]

#[macro_use]
mod setters;

pub mod artifact;
pub mod audit;
pub mod error;
mod file_system;
pub mod identity;
mod local;
mod path;
pub mod process;
mod roots;
mod sandbox;
pub mod terminal;
mod walk;

/// The trait's default implementations, for a backend that overrides a method to fall back to.
pub mod defaults {
    pub use crate::file_system::{fill, range_by_streaming, walk_by_listing};
}
pub use file_system::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, FileSystemResult,
    Narrowed, ReadDirectoryEntry, RemoveOptions, RenameOptions, WALK_BYTES_LIMIT, WALK_DEPTH_LIMIT,
    WALK_ENTRY_LIMIT, Walk, WalkEntry, WalkError, WalkOptions, WriteChunks, WriteOptions,
};
pub use local::{COPY_DEPTH_LIMIT, DEFAULT_READ_LIMIT, LocalFileSystem, Narrowing};
pub use path::AbsolutePathBuf;
pub use process::{LocalProcesses, ProcessPolicy};
pub use roots::{RootAccess, RootDescription};
pub use sandbox::{Access, Root, Sandbox};

/// The README's examples, compiled and run as doctests so they never rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
