//! The `ExecutorFileSystem` trait, and its default implementations that take more than a line:
//! each is built from the trait's other methods, so any backend gets it, and is public for a
//! backend that overrides one to fall back to it (`capfs::defaults`).

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::path::AbsolutePathBuf;
use crate::roots::RootDescription;
pub use crate::walk::{
    WALK_BYTES_LIMIT, WALK_DEPTH_LIMIT, WALK_ENTRY_LIMIT, Walk, WalkEntry, WalkError, WalkOptions,
};
use crate::walk::{WalkFilter, raw_child, walk_child};

mod options;
pub use options::{
    CopyOptions, CreateDirectoryOptions, FileMetadata, ReadDirectoryEntry, RemoveOptions,
    RenameOptions, WriteOptions,
};

/// Every operation returns a plain `std::io::Result`: callers match on `io::ErrorKind`, and both
/// backends give the same kind for the same situation.
pub type FileSystemResult<T> = std::io::Result<T>;

/// The contents of a streamed write as owned pieces, for
/// [`ExecutorFileSystem::write_file_from_chunks`].
pub trait WriteChunks: Send {
    /// The next piece, or `None` at the end. A piece may be empty. An error ends the write,
    /// which then leaves the file as it was.
    fn poll_next_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<bytes::Bytes>>>;
}

/// Pieces read as bytes, for a backend that takes a reader.
struct ChunksReader<'a> {
    chunks: &'a mut dyn WriteChunks,
    current: bytes::Bytes,
}

impl tokio::io::AsyncRead for ChunksReader<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.current.is_empty() {
            match std::task::ready!(this.chunks.poll_next_chunk(cx))? {
                Some(chunk) => this.current = chunk,
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = this.current.len().min(buf.remaining());
        buf.put_slice(&this.current.split_to(n));
        Poll::Ready(Ok(()))
    }
}

/// What [`ExecutorFileSystem::narrowed`] returns.
#[non_exhaustive]
pub struct Narrowed {
    /// The file system serving the directories that could be opened, and nothing else.
    pub fs: std::sync::Arc<dyn ExecutorFileSystem>,
    /// For each directory asked for, in order: the root that now serves it (its path, which
    /// may differ from the one asked for when that one went through a symlink, and its access),
    /// or why it could not be used.
    pub roots: Vec<std::io::Result<RootDescription>>,
}

impl std::fmt::Debug for Narrowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Narrowed")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

/// A file system an agent's tools use, confined to sandbox roots.
///
/// Every path is an [`AbsolutePathBuf`]; a path under no sandbox root, or one that leads out of its
/// root through `..` or a symlink, fails with `PermissionDenied` and touches nothing.
#[async_trait]
pub trait ExecutorFileSystem: Send + Sync {
    /// Reads a whole regular file.
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>>;

    /// The largest file [`read_file`](Self::read_file) returns, when this file system has such a
    /// bound. A server announces it, so that its clients apply the same bound to whole-file
    /// reads. The default is `None`.
    fn read_file_limit(&self) -> Option<u64> {
        None
    }

    /// The sandbox roots this file system serves, as a server announces them in the
    /// `initialize` result. The default is none (the file system does not say).
    fn served_roots(&self) -> Vec<RootDescription> {
        Vec::new()
    }

    /// Streams a whole regular file into `writer`, calling `progress` with the running byte count,
    /// and returns the number of bytes written. Unlike [`read_file`](Self::read_file), a stream
    /// is not bound by the read limit: memory stays bounded whatever the file's size. The
    /// default implementation reads the file with `read_file` (so it is bound by the limit);
    /// both backends override it.
    ///
    /// # Errors
    ///
    /// As [`read_file`](Self::read_file) (less the read limit for the backends' own
    /// implementations); the error of `writer`. What was already written to `writer` stays there.
    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let data = self.read_file(path).await?;
        writer.write_all(&data).await?;
        writer.flush().await?;
        progress(data.len() as u64);
        Ok(data.len() as u64)
    }

    /// Opens a regular file to be read straight from its descriptor, by a caller that moves its
    /// contents itself (the server reads them straight into its data frames). `None` when this
    /// file system has no descriptor to give, or when reading one could block for long (a root
    /// not on a local disk): the caller then uses [`read_file_to`](Self::read_file_to). The
    /// default is `None`.
    ///
    /// # Errors
    ///
    /// As [`read_file_to`](Self::read_file_to).
    async fn open_for_transfer(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Option<std::fs::File>> {
        let _ = path;
        Ok(None)
    }

    /// Opens a regular file for reads at any offset (`fs/open` handles): the descriptor keeps
    /// reading the file it opened, whatever later happens to its name. The default is
    /// `Unsupported`.
    ///
    /// # Errors
    ///
    /// As [`read_file`](Self::read_file), less the read limit; `Unsupported`.
    async fn open_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::fs::File> {
        Err(crate::error::open_unsupported(path))
    }

    /// Replaces the file at `path` atomically with what `reader` yields: exactly `size` bytes,
    /// or everything up to the reader's end when `size` is `None`. `progress` gets the running
    /// byte count; the result is the number of bytes written. A reader that fails, ends early or
    /// runs long leaves the file as it was and nothing behind. The default implementation
    /// collects the bytes in memory, calls [`write_file`](Self::write_file) and refuses
    /// non-default `options` with `Unsupported`; both backends override it.
    ///
    /// # Errors
    ///
    /// As [`write_file`](Self::write_file); the error of `reader`; `UnexpectedEof` when it ends
    /// before `size` bytes, `InvalidInput` when it carries more.
    async fn write_file_from(
        &self,
        path: &AbsolutePathBuf,
        reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        if options != WriteOptions::default() {
            return Err(crate::error::write_options_unsupported(path));
        }
        let mut data = Vec::new();
        match size {
            Some(size) => {
                (&mut *reader)
                    .take(size.saturating_add(1))
                    .read_to_end(&mut data)
                    .await?;
                crate::error::check_stream_size(data.len() as u64, size)?;
            }
            None => {
                reader.read_to_end(&mut data).await?;
            }
        }
        let written = data.len() as u64;
        self.write_file(path, data).await?;
        progress(written);
        Ok(written)
    }

    /// [`write_file_from`](Self::write_file_from) with the contents in owned pieces: the same
    /// replacement, sizes, progress and errors. A caller that receives its data in buffers of its
    /// own (a server its data frames) hands them over as they are, and a backend that writes
    /// each piece from there makes no copy of it first (the local backend). The default
    /// implementation reads the pieces through [`write_file_from`](Self::write_file_from).
    ///
    /// # Errors
    ///
    /// As [`write_file_from`](Self::write_file_from), the error of `chunks` as that of its reader.
    async fn write_file_from_chunks(
        &self,
        path: &AbsolutePathBuf,
        chunks: &mut dyn WriteChunks,
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let mut reader = ChunksReader {
            chunks,
            current: bytes::Bytes::new(),
        };
        self.write_file_from(path, &mut reader, size, options, progress)
            .await
    }

    /// Replaces the file's contents atomically (temporary file in the same directory, then rename).
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()>;

    /// Creates a directory (and its parents when `recursive`).
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()>;

    /// Reports the type, size and times of a path, following symlinks inside the root.
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata>;

    /// Lists a directory, one entry per name, in readdir order.
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>>;

    /// Removes a file, a symlink (the link itself) or a directory (`recursive` for a non-empty one).
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()>;

    /// Copies a file, a symlink (as a link) or, with `recursive`, a directory tree.
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()>;

    /// Renames atomically within one root.
    ///
    /// Errors: the [semantics table](crate#semantics).
    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()>;

    /// Reads the text of the symlink at `path` (the link itself; it is not followed, and its
    /// text may name a place outside the root: it is only text).
    ///
    /// # Errors
    ///
    /// `NotFound`; `InvalidInput` when `path` is not a symlink; `PermissionDenied` for an
    /// escape in the path's parents; `Unsupported` from a file system without links.
    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<PathBuf> {
        Err(crate::error::unsupported(path, "reading symlinks"))
    }

    /// Creates a symlink at `path` whose text is `target`. Following it later stays confined
    /// like any other link: a target outside the root is an escape when used.
    ///
    /// # Errors
    ///
    /// `AlreadyExists`; `NotFound` for a missing parent; `PermissionDenied` for an escape or a
    /// read-only root; `Unsupported` from a file system without links.
    async fn create_symlink(
        &self,
        path: &AbsolutePathBuf,
        target: &std::path::Path,
    ) -> FileSystemResult<()> {
        let _ = target;
        Err(crate::error::unsupported(path, "creating symlinks"))
    }

    /// At most `length` bytes of the regular file at `path` from byte `offset` (fewer at its
    /// end, none past it), reading no more of it where the backend can seek: both backends do
    /// (the remote one with `capfs/readFileRange` when the server offers it). The default
    /// streams the file through [`read_file_to`](Self::read_file_to), keeping only the range.
    ///
    /// # Errors
    ///
    /// As [`read_file_to`](Self::read_file_to).
    async fn read_file_range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> FileSystemResult<Vec<u8>> {
        range_by_streaming(self, path, offset, length).await
    }

    /// A file system serving only the directories `dirs`, each inside this one's roots and
    /// opened as a root of its own, so that a symlink leading out of one of them is an escape
    /// (a server narrows one connection with it, `capfs/narrowRoots`). Only narrows: nothing
    /// this file system refuses is served by the result. The default is `Unsupported`.
    ///
    /// # Errors
    ///
    /// `Unsupported` from a file system that cannot narrow; the directories that cannot be
    /// used are reported in [`Narrowed::roots`], not as an error.
    async fn narrowed(&self, dirs: &[RootDescription]) -> FileSystemResult<Narrowed> {
        let _ = dirs;
        Err(crate::error::narrowing_unsupported())
    }

    /// Walks the tree below the directory `path` (not following symlinks), returning the
    /// entries `options` select, bounded in depth and count.
    ///
    /// The default implementation lists one directory at a time through
    /// [`read_directory`](Self::read_directory); backends override it to walk in one step.
    ///
    /// # Errors
    ///
    /// As [`read_directory`](Self::read_directory) for `path`; `InvalidInput` for a glob that
    /// does not parse. Subdirectories that vanish or cannot be read during the walk are
    /// left out and reported in [`Walk::errors`].
    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        walk_by_listing(self, path, options).await
    }
}

/// The default [`ExecutorFileSystem::walk`]: one `read_directory` per directory listed, one
/// `get_metadata` per file when sizes are asked for (per entry but links when metadata is), and
/// one `read_link` per link when link text is.
pub async fn walk_by_listing<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    options: &WalkOptions,
) -> FileSystemResult<Walk> {
    let filter = WalkFilter::new(options)?;
    let (max_depth, max_entries) = options.bounds();
    let mut walk = Walk::default();
    if max_depth == 0 {
        walk.truncated = true;
        return Ok(walk);
    }
    let mut bytes = 0;
    // One level per directory being listed: its path, its relative path (and its exact one
    // when a name in it is not UTF-8), its depth (1 for the start) and the entries not yet
    // visited.
    let first = fs.read_directory(path).await?;
    let mut stack = vec![(path.clone(), String::new(), None, 1usize, first.into_iter())];
    while let Some((dir, prefix, raw, depth, entries)) = stack.last_mut() {
        let Some(entry) = entries.next() else {
            stack.pop();
            continue;
        };
        let raw = raw_child(raw.as_deref(), prefix, entry.name());
        // A lossy name without its exact bytes names nothing that can be reached.
        let unreachable = entry.lossy_name && entry.raw_name.is_none();
        if unreachable || (raw.is_some() && !options.raw_names) {
            walk.non_utf8_names_omitted += 1;
            continue;
        }
        let rel = walk_child(prefix, &entry.file_name);
        if filter.excludes(&rel) {
            continue;
        }
        let child = dir.join(entry.name())?;
        let depth = *depth;
        if filter.selects(&rel) {
            let mut found = WalkEntry::new(rel.clone());
            found.is_directory = entry.is_directory;
            found.is_file = entry.is_file;
            found.is_symlink = entry.is_symlink;
            found.raw_path = raw.clone();
            fill(fs, &child, &mut found, options).await;
            if !walk.push(found, max_entries, &mut bytes) {
                break;
            }
        }
        if entry.is_directory && !entry.is_symlink {
            if depth == max_depth {
                walk.truncated = true;
                continue;
            }
            match fs.read_directory(&child).await {
                Ok(list) => stack.push((child, rel, raw, depth + 1, list.into_iter())),
                Err(e) => walk.failed(&rel, &e),
            }
        }
    }
    Ok(walk)
}

/// Fills in what `options` asks of `entry` beyond its type: each call that fails leaves its
/// part unknown (0 or None), as the entry may be gone since it was listed. A symlink's
/// metadata is never asked for: `get_metadata` would describe what it leads to.
pub async fn fill<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    entry: &mut WalkEntry,
    options: &WalkOptions,
) {
    let wants_size = options.sizes && entry.is_file;
    let wants_metadata = options.metadata && !entry.is_symlink;
    if wants_size || wants_metadata {
        let metadata = fs.get_metadata(path).await.ok();
        if wants_size {
            entry.size = metadata.as_ref().map_or(0, |m| m.size);
        }
        if wants_metadata && let Some(m) = metadata {
            entry.mode = Some(m.mode);
            entry.modified_at_ms = Some(m.modified_at_ms);
        }
    }
    if options.link_targets && entry.is_symlink {
        entry.link_target = fs.read_link(path).await.ok();
    }
}

/// The default [`ExecutorFileSystem::read_file_range`]: the file streamed, only the range kept.
pub async fn range_by_streaming<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    offset: u64,
    length: u64,
) -> io::Result<Vec<u8>> {
    let mut keep = Keep {
        at: 0,
        offset,
        end: offset.saturating_add(length),
        data: Vec::new(),
    };
    match fs.read_file_to(path, &mut keep, &mut |_| {}).await {
        Err(_) if keep.at >= keep.end => Ok(keep.data),
        Err(e) => Err(e),
        Ok(_) => Ok(keep.data),
    }
}

/// A writer keeping the bytes of one range of what it is given, and refusing more past it.
struct Keep {
    at: u64,
    offset: u64,
    end: u64,
    data: Vec<u8>,
}

impl tokio::io::AsyncWrite for Keep {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let start = this.at;
        let stop = start + buf.len() as u64;
        let from = this.offset.max(start);
        let to = this.end.min(stop);
        if from < to {
            this.data
                .extend_from_slice(&buf[(from - start) as usize..(to - start) as usize]);
        }
        this.at = stop;
        if this.at >= this.end {
            return Poll::Ready(Err(crate::error::range_read()));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
