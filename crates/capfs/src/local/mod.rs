//! `LocalFileSystem`: the trait served by cap-std handles opened once on the sandbox roots.
//!
//! Each operation is one blocking function (one file per operation family) on the roots'
//! handles. The async trait methods move the whole function to tokio's blocking pool, except
//! where the hand-off costs more than the work and the root is on a local-disk file system
//! ([`Root::is_local_disk`](crate::Root::is_local_disk), decided once when the root is opened):
//! there `get_metadata` (a few `stat` calls) and `read_file`'s open and `fstat` run on the
//! calling task, and so does the read itself for files up to [`INLINE_READ_BYTES`]. None of
//! these can block on a special file (paths are looked at with `O_PATH`, opens are non-blocking
//! and checked with `fstat`); on a local disk they take microseconds. On a network or FUSE file
//! system, where a `stat` can stall, every operation runs on the blocking pool.
//!
//! # Cancellation
//!
//! Dropping the future of an operation does not stop it: the blocking work runs to completion
//! (or failure) on its thread, and its result is discarded. Every mutation is either atomic
//! (`write_file`, file `copy`), done in steps that each leave a whole entry (`rename`, and the
//! removal of a directory, first move the entry to a private `.capfs-claim-*` name in its
//! directory, so that a sandbox root exchanged under the name is recognised; a crash between
//! the steps leaves the entry under that name), or leaves a consistent, partially done tree
//! (recursive `remove` and `copy`), never a half-written file.

mod claim;
mod contents;
mod copy;
mod handles;
mod metadata;
mod narrow;
mod range;
mod read;
mod remove;
mod rename;
mod resolve;
mod stage;
mod streamed;
mod tree;
mod write;

use std::io;
use std::sync::Arc;

use async_trait::async_trait;

use tokio::io::AsyncWriteExt;

use crate::error::{self, check_stream_size, stream_too_long, with_path};
use crate::file_system::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, FileSystemResult,
    Narrowed, ReadDirectoryEntry, RemoveOptions, RenameOptions, WriteChunks, WriteOptions,
};
use crate::path::AbsolutePathBuf;
use crate::roots::RootDescription;
use crate::sandbox::Sandbox;
use crate::walk::{Walk, WalkOptions};
pub use narrow::Narrowing;
use streamed::Source;

/// The default largest file `read_file` returns: 512 MiB.
pub const DEFAULT_READ_LIMIT: u64 = 512 * 1024 * 1024;

/// Files up to this size are read on the calling task; larger ones on tokio's blocking pool.
pub(crate) const INLINE_READ_BYTES: u64 = 256 * 1024;

/// Bytes a streamed read or write moves per call on the blocking pool. The chunks in between
/// are awaited on the calling task, so no blocking thread ever waits for the other side.
const STREAM_BATCH_BYTES: usize = 1024 * 1024;
/// Entries `read_directory` lists on the calling task for a root on a local disk; the rest of a
/// larger directory is listed in the blocking pool.
const INLINE_DIRECTORY_ENTRIES: usize = 512;

/// The deepest directory tree a recursive `copy` reproduces; deeper trees fail with
/// `InvalidInput` before anything below the limit is descended into.
pub const COPY_DEPTH_LIMIT: usize = 4096;

/// An [`ExecutorFileSystem`] on the local host, confined to a [`Sandbox`].
///
/// # Examples
///
/// ```
/// use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let sandbox = Sandbox::new().with_root(dir.path(), Access::ReadWrite)?;
/// let root = sandbox.roots()[0].path().clone();
/// let fs = LocalFileSystem::new(sandbox);
///
/// let file = root.join("hello.txt")?;
/// fs.write_file(&file, b"hi".to_vec()).await?;
/// assert_eq!(fs.read_file(&file).await?, b"hi");
///
/// let outside = AbsolutePathBuf::try_from("/etc/passwd")?;
/// let err = fs.read_file(&outside).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LocalFileSystem {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub sandbox: Sandbox,
    pub read_limit: u64,
}

impl LocalFileSystem {
    /// A file system over `sandbox` with the default read limit.
    pub fn new(sandbox: Sandbox) -> Self {
        Self::with_read_limit(sandbox, DEFAULT_READ_LIMIT)
    }

    /// A file system over `sandbox` whose `read_file` refuses files larger than `read_limit`.
    pub fn with_read_limit(sandbox: Sandbox, read_limit: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                sandbox,
                read_limit,
            }),
        }
    }

    /// The sandbox this file system serves.
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }

    /// The largest file `read_file` returns.
    pub fn read_limit(&self) -> u64 {
        self.inner.read_limit
    }

    /// True when the cheap operations on `path` (`get_metadata`, small `read_file`s) run on the
    /// calling task: its root is on a local-disk file system. False for a path under no root.
    /// For tests (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn runs_inline(&self, path: &AbsolutePathBuf) -> bool {
        self.inline(path)
    }

    fn inline(&self, path: &AbsolutePathBuf) -> bool {
        self.inner
            .sandbox
            .root_for(path)
            .is_some_and(|(root, _)| root.is_local_disk())
    }

    async fn run<T, F>(&self, op: F) -> FileSystemResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> io::Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || op(&inner))
            .await
            .map_err(|e| error::task_failed(&e))?
    }

    /// `write_file_from` and `write_file_from_chunks`: the staged file filled batch by batch,
    /// then moved over the target.
    async fn write_streamed(
        &self,
        path: &AbsolutePathBuf,
        mut source: Source<'_>,
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let target = path.clone();
        let mut staged = self.run(move |fs| write::stage(fs, &target)).await?;
        staged.announce(size);
        let mut written = 0u64;
        loop {
            let want = match size {
                Some(size) => (size - written)
                    .saturating_add(1)
                    .min(STREAM_BATCH_BYTES as u64),
                None => STREAM_BATCH_BYTES as u64,
            };
            let batch = source.next_batch(want).await?;
            let len = batch.len();
            if size.is_some_and(|size| written + len > size) {
                return Err(stream_too_long(size.unwrap_or_default()));
            }
            if len == 0 {
                break;
            }
            written += len;
            let path = path.clone();
            let (returned, batch) = self
                .run(move |_| {
                    let result = batch.write_to(&mut staged).map_err(|e| with_path(&path, e));
                    result.map(|()| (staged, batch))
                })
                .await?;
            staged = returned;
            source.give_back(batch);
            progress(written);
        }
        if let Some(size) = size {
            check_stream_size(written, size)?;
        }
        let path = path.clone();
        self.run(move |_| staged.commit(options).map_err(|e| with_path(&path, e)))
            .await?;
        Ok(written)
    }
}

#[async_trait]
impl ExecutorFileSystem for LocalFileSystem {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        let limit = self.inner.read_limit;
        if !self.inline(path) {
            let path = path.clone();
            return self
                .run(move |fs| {
                    let (file, size) = read::open_for_read(fs, &path)?;
                    read::read_opened(&file, size, &path, limit)
                })
                .await;
        }
        // On a local disk, opening never blocks (O_PATH stat, O_NONBLOCK open, fstat): it runs
        // here. So does reading a small file; a large one is read on the blocking pool.
        let (file, size) = read::open_for_read(&self.inner, path)?;
        if size <= INLINE_READ_BYTES {
            return read::read_opened(&file, size, path, limit);
        }
        let path = path.clone();
        self.run(move |_| read::read_opened(&file, size, &path, limit))
            .await
    }

    fn read_file_limit(&self) -> Option<u64> {
        Some(self.inner.read_limit)
    }

    async fn read_file_range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> FileSystemResult<Vec<u8>> {
        if self.inline(path) && range::is_small(length) {
            return range::read_range(&self.inner, path, offset, length);
        }
        let path = path.clone();
        self.run(move |fs| range::read_range(fs, &path, offset, length))
            .await
    }

    async fn narrowed(&self, dirs: &[RootDescription]) -> FileSystemResult<Narrowed> {
        narrow::narrowed(self, dirs).await
    }

    fn served_roots(&self) -> Vec<RootDescription> {
        let roots = self.inner.sandbox.roots().iter();
        roots
            .map(|root| RootDescription {
                path: root.path().clone(),
                access: root.access().into(),
            })
            .collect()
    }

    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let (file, size) = if self.inline(path) {
            read::open_regular(&self.inner, path)?
        } else {
            let opened = path.clone();
            self.run(move |fs| read::open_regular(fs, &opened)).await?
        };
        let mut sent = 0u64;
        // A small file on a local disk is read here, like `read_file` reads it: one batch and no
        // hand-off. Whatever it has grown to past the batch goes through the blocking pool.
        if size <= INLINE_READ_BYTES && self.inline(path) {
            let batch = read::read_batch(&file, INLINE_READ_BYTES as usize + 1, path)?;
            writer.write_all(&batch).await?;
            sent = batch.len() as u64;
            progress(sent);
            if sent <= INLINE_READ_BYTES {
                writer.flush().await?;
                return Ok(sent);
            }
        }
        let file = Arc::new(file);
        // One buffer for every batch, handed to the blocking pool and back: a fresh one would
        // have its pages faulted in again each time.
        let mut batch = Vec::with_capacity(STREAM_BATCH_BYTES);
        loop {
            let (file, path) = (Arc::clone(&file), path.clone());
            batch.clear();
            batch = self
                .run(move |_| {
                    read::read_batch_into(&file, &mut batch, STREAM_BATCH_BYTES, &path)?;
                    Ok(batch)
                })
                .await?;
            if batch.is_empty() {
                break;
            }
            writer.write_all(&batch).await?;
            sent += batch.len() as u64;
            progress(sent);
        }
        writer.flush().await?;
        Ok(sent)
    }

    async fn open_for_transfer(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Option<std::fs::File>> {
        // Opening never blocks on a local disk, and a read there blocks only as long as an
        // inline read does; elsewhere the caller reads through the blocking pool.
        if !self.inline(path) {
            return Ok(None);
        }
        let (file, _) = read::open_regular(&self.inner, path)?;
        Ok(Some(file))
    }

    async fn open_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::fs::File> {
        let path = path.clone();
        self.run(move |fs| read::open_regular(fs, &path).map(|(file, _)| file))
            .await
    }

    async fn write_file_from(
        &self,
        path: &AbsolutePathBuf,
        reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let source = Source::Reader(reader, Vec::with_capacity(STREAM_BATCH_BYTES));
        self.write_streamed(path, source, size, options, progress)
            .await
    }

    async fn write_file_from_chunks(
        &self,
        path: &AbsolutePathBuf,
        chunks: &mut dyn WriteChunks,
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let source = Source::Chunks(chunks, Vec::new());
        self.write_streamed(path, source, size, options, progress)
            .await
    }

    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        let path = path.clone();
        self.run(move |fs| write::write_file(fs, &path, &contents))
            .await
    }

    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        let path = path.clone();
        self.run(move |fs| metadata::create_directory(fs, &path, options))
            .await
    }

    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        // On a local disk, a few stat calls (none of which opens the file): cheaper here than the
        // hand-off to the blocking pool.
        if self.inline(path) {
            return metadata::get_metadata(&self.inner, path);
        }
        let path = path.clone();
        self.run(move |fs| metadata::get_metadata(fs, &path)).await
    }

    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        // On a local disk a small directory is listed here (its entries carry their types, so
        // there is one `getdents64` and no stat per entry); past the bound the listing goes on
        // in the blocking pool, so that no call holds the task's thread for long.
        if self.inline(path) {
            let listing = metadata::start_listing(&self.inner, path, INLINE_DIRECTORY_ENTRIES)?;
            let rest = match listing.complete() {
                Ok(entries) => return Ok(entries),
                Err(rest) => rest,
            };
            let path = path.clone();
            return self.run(move |_| rest.finish(&path)).await;
        }
        let path = path.clone();
        self.run(move |fs| metadata::read_directory(fs, &path))
            .await
    }

    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        let path = path.clone();
        self.run(move |fs| remove::remove(fs, &path, options)).await
    }

    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        let (source, destination) = (source.clone(), destination.clone());
        self.run(move |fs| copy::copy(fs, &source, &destination, options))
            .await
    }

    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        let (source, destination) = (source.clone(), destination.clone());
        self.run(move |fs| rename::rename(fs, &source, &destination, options))
            .await
    }

    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::path::PathBuf> {
        let path = path.clone();
        self.run(move |fs| metadata::read_link(fs, &path)).await
    }

    async fn create_symlink(
        &self,
        path: &AbsolutePathBuf,
        target: &std::path::Path,
    ) -> FileSystemResult<()> {
        let (path, target) = (path.clone(), target.to_path_buf());
        self.run(move |fs| metadata::create_symlink(fs, &path, &target))
            .await
    }

    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        let (path, options) = (path.clone(), options.clone());
        self.run(move |fs| tree::walk(fs, &path, &options)).await
    }
}
