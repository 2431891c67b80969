//! capfs: a file system an AI agent's tools cannot escape.
//!
//! Every operation goes through one async trait, [`ExecutorFileSystem`]. [`LocalFileSystem`]
//! serves it with cap-std directory handles opened once on the [`Sandbox`] roots: no operation
//! reaches a file outside the roots, not by `..`, absolute paths, symlinks or racing renames.
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

pub mod artifact;
mod environment;
mod error;
mod file_system;
mod local;
mod path;
pub mod protocol;
mod remote;
mod sandbox;
pub mod server;
mod transport;

pub use environment::Environment;
pub use file_system::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, FileSystemResult,
    ReadDirectoryEntry, RemoveOptions, RenameOptions, WALK_DEPTH_LIMIT, Walk, WalkEntry,
    WalkOptions,
};
pub use local::{
    COPY_DEPTH_LIMIT, COPY_DIRECTORY_NEEDS_RECURSIVE, COPY_INTO_ITSELF, COPY_ONTO_ITSELF,
    COPY_UNSUPPORTED_TYPE, DEFAULT_READ_LIMIT, INLINE_READ_BYTES, LocalFileSystem,
};
pub use path::AbsolutePathBuf;
pub use remote::{RemoteFileSystem, RemoteOptions};
pub use sandbox::{Access, Root, Sandbox};

/// The README's examples, compiled and run as doctests so they never rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
