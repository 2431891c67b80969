//! [`Audited`]: any file system, with an audit line written for every call made on it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{AuditLog, AuditRecord};
use crate::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, Narrowed, ReadDirectoryEntry, RemoveOptions, RenameOptions, RootDescription,
    Walk, WalkOptions, WriteChunks, WriteOptions,
};

/// A call of [`ExecutorFileSystem`] that an audit line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`read_file`](ExecutorFileSystem::read_file).
    ReadFile,
    /// [`read_file_to`](ExecutorFileSystem::read_file_to).
    ReadFileTo,
    /// [`read_file_range`](ExecutorFileSystem::read_file_range).
    ReadFileRange,
    /// [`open_for_transfer`](ExecutorFileSystem::open_for_transfer).
    OpenForTransfer,
    /// [`open_file`](ExecutorFileSystem::open_file).
    OpenFile,
    /// [`write_file`](ExecutorFileSystem::write_file).
    WriteFile,
    /// [`write_file_from`](ExecutorFileSystem::write_file_from).
    WriteFileFrom,
    /// [`create_directory`](ExecutorFileSystem::create_directory).
    CreateDirectory,
    /// [`get_metadata`](ExecutorFileSystem::get_metadata).
    GetMetadata,
    /// [`read_directory`](ExecutorFileSystem::read_directory).
    ReadDirectory,
    /// [`remove`](ExecutorFileSystem::remove).
    Remove,
    /// [`copy`](ExecutorFileSystem::copy).
    Copy,
    /// [`rename`](ExecutorFileSystem::rename).
    Rename,
    /// [`read_link`](ExecutorFileSystem::read_link).
    ReadLink,
    /// [`create_symlink`](ExecutorFileSystem::create_symlink).
    CreateSymlink,
    /// [`narrowed`](ExecutorFileSystem::narrowed).
    Narrowed,
    /// [`walk`](ExecutorFileSystem::walk).
    Walk,
}

impl Operation {
    /// Every operation, in the trait's order.
    pub const ALL: [Operation; 17] = [
        Self::ReadFile,
        Self::ReadFileTo,
        Self::ReadFileRange,
        Self::OpenForTransfer,
        Self::OpenFile,
        Self::WriteFile,
        Self::WriteFileFrom,
        Self::CreateDirectory,
        Self::GetMetadata,
        Self::ReadDirectory,
        Self::Remove,
        Self::Copy,
        Self::Rename,
        Self::ReadLink,
        Self::CreateSymlink,
        Self::Narrowed,
        Self::Walk,
    ];

    /// The trait method's name (`read_file`): what a line names the call by unless
    /// [`Audited::with_names`] says otherwise.
    pub fn name(self) -> &'static str {
        match self {
            Self::ReadFile => "read_file",
            Self::ReadFileTo => "read_file_to",
            Self::ReadFileRange => "read_file_range",
            Self::OpenForTransfer => "open_for_transfer",
            Self::OpenFile => "open_file",
            Self::WriteFile => "write_file",
            Self::WriteFileFrom => "write_file_from",
            Self::CreateDirectory => "create_directory",
            Self::GetMetadata => "get_metadata",
            Self::ReadDirectory => "read_directory",
            Self::Remove => "remove",
            Self::Copy => "copy",
            Self::Rename => "rename",
            Self::ReadLink => "read_link",
            Self::CreateSymlink => "create_symlink",
            Self::Narrowed => "narrowed",
            Self::Walk => "walk",
        }
    }
}

/// A file system that passes every call on to the one it wraps and writes one audit line for
/// each: the operation, the paths it named (a new link's target among them), its outcome, the
/// bytes of file contents it moved (a walk: the entries it found) and its duration. What it
/// returns is the wrapped file system's, unchanged; a file system [`narrowed`] from it is
/// audited into the same log.
///
/// [`narrowed`]: ExecutorFileSystem::narrowed
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use std::sync::Arc;
/// use capfs::audit::{AuditLog, Audited};
/// use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
///
/// let dir = tempfile::tempdir()?;
/// let log_file = dir.path().join("audit.jsonl");
/// let workspace = dir.path().join("ws");
/// std::fs::create_dir(&workspace)?;
/// let local = LocalFileSystem::new(Sandbox::new().with_root(&workspace, Access::ReadWrite)?);
/// let root = local.sandbox().roots()[0].path().clone();
/// let fs = Audited::new(Arc::new(local), AuditLog::open(&log_file)?).with_peer("agent-7");
/// fs.write_file(&root.join("a.txt")?, b"hello".to_vec()).await?;
/// assert!(fs.read_file(&root.join("../outside")?).await.is_err());
///
/// let lines = std::fs::read_to_string(&log_file)?;
/// let lines: Vec<&str> = lines.lines().collect();
/// assert!(lines[0].contains(r#""method":"write_file""#) && lines[0].contains(r#""bytes":5"#));
/// assert!(lines[1].contains(r#""outcome":"PermissionDenied","denied":true"#));
/// # Ok(()) }
/// ```
pub struct Audited<F: ?Sized> {
    inner: Arc<F>,
    log: AuditLog,
    connection: u64,
    peer: Arc<str>,
    names: fn(Operation) -> &'static str,
    codes: Option<fn(&io::Error) -> i64>,
}

impl<F: ?Sized> Audited<F> {
    /// `inner`, audited into `log`: lines name connection 1 and peer `local`, each call by its
    /// trait method's name, and carry no error code.
    pub fn new(inner: Arc<F>, log: AuditLog) -> Self {
        Self {
            inner,
            log,
            connection: 1,
            peer: Arc::from("local"),
            names: Operation::name,
            codes: None,
        }
    }

    /// Lines name `peer` as the caller.
    #[must_use]
    pub fn with_peer(mut self, peer: impl Into<Arc<str>>) -> Self {
        self.peer = peer.into();
        self
    }

    /// Lines name connection `connection`.
    #[must_use]
    pub fn with_connection(mut self, connection: u64) -> Self {
        self.connection = connection;
        self
    }

    /// Lines name each call by `names` (a server's method names, say).
    #[must_use]
    pub fn with_names(mut self, names: fn(Operation) -> &'static str) -> Self {
        self.names = names;
        self
    }

    /// A failed call's line carries the code `codes` gives its error (a server's wire code).
    #[must_use]
    pub fn with_error_codes(mut self, codes: fn(&io::Error) -> i64) -> Self {
        self.codes = Some(codes);
        self
    }

    /// The audited file system.
    pub fn inner(&self) -> &Arc<F> {
        &self.inner
    }

    /// The same settings around `inner`.
    fn around<G: ?Sized>(&self, inner: Arc<G>) -> Audited<G> {
        Audited {
            inner,
            log: self.log.clone(),
            connection: self.connection,
            peer: Arc::clone(&self.peer),
            names: self.names,
            codes: self.codes,
        }
    }

    /// Writes the line of `operation` on `paths`, started at `started`, that gave `result`
    /// having moved `bytes` (a failed call moved none).
    fn line<T>(
        &self,
        operation: Operation,
        paths: &[String],
        started: Instant,
        result: &FileSystemResult<T>,
        bytes: u64,
    ) {
        let record = AuditRecord::new(self.connection, &self.peer, (self.names)(operation), paths)
            .with_elapsed(started.elapsed());
        let record = match result {
            Ok(_) => record.with_bytes(bytes),
            Err(e) => record.failed(e.kind(), self.codes.map(|code| code(e)), e.to_string()),
        };
        self.log.record(&record);
    }
}

impl<F: ?Sized> Clone for Audited<F> {
    fn clone(&self) -> Self {
        self.around(Arc::clone(&self.inner))
    }
}

impl<F: ?Sized> std::fmt::Debug for Audited<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audited")
            .field("connection", &self.connection)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// Runs `call` on the wrapped file system and writes its line: `$op` on `$paths`, with the bytes
/// `$bytes` says a success moved.
macro_rules! audited {
    ($self:ident, $op:ident, [$($path:expr),*], $call:expr, $bytes:expr) => {{
        let paths = [$(AsRef::<Path>::as_ref($path).display().to_string()),*];
        let started = Instant::now();
        let result = $call.await;
        let moved = moved(&result, $bytes);
        $self.line(Operation::$op, &paths, started, &result, moved);
        result
    }};
}

/// The bytes a call moved: what `bytes` says of its result, none when it failed.
fn moved<T>(result: &FileSystemResult<T>, bytes: impl Fn(&T) -> u64) -> u64 {
    result.as_ref().map_or(0, bytes)
}

#[async_trait]
impl<F: ExecutorFileSystem + ?Sized> ExecutorFileSystem for Audited<F> {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        audited!(
            self,
            ReadFile,
            [path],
            self.inner.read_file(path),
            |d| d.len() as u64
        )
    }

    fn read_file_limit(&self) -> Option<u64> {
        self.inner.read_file_limit()
    }

    fn served_roots(&self) -> Vec<RootDescription> {
        self.inner.served_roots()
    }

    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let call = self.inner.read_file_to(path, writer, progress);
        audited!(self, ReadFileTo, [path], call, |n| *n)
    }

    async fn open_for_transfer(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Option<std::fs::File>> {
        audited!(
            self,
            OpenForTransfer,
            [path],
            self.inner.open_for_transfer(path),
            |_| 0
        )
    }

    async fn open_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::fs::File> {
        audited!(self, OpenFile, [path], self.inner.open_file(path), |_| 0)
    }

    async fn write_file_from(
        &self,
        path: &AbsolutePathBuf,
        reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let call = self
            .inner
            .write_file_from(path, reader, size, options, progress);
        audited!(self, WriteFileFrom, [path], call, |n| *n)
    }

    async fn write_file_from_chunks(
        &self,
        path: &AbsolutePathBuf,
        chunks: &mut dyn WriteChunks,
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let call = self
            .inner
            .write_file_from_chunks(path, chunks, size, options, progress);
        audited!(self, WriteFileFrom, [path], call, |n| *n)
    }

    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        let len = contents.len() as u64;
        let call = self.inner.write_file(path, contents);
        audited!(self, WriteFile, [path], call, |_| len)
    }

    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        let call = self.inner.create_directory(path, options);
        audited!(self, CreateDirectory, [path], call, |_| 0)
    }

    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        audited!(
            self,
            GetMetadata,
            [path],
            self.inner.get_metadata(path),
            |_| 0
        )
    }

    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        audited!(
            self,
            ReadDirectory,
            [path],
            self.inner.read_directory(path),
            |_| 0
        )
    }

    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        audited!(
            self,
            Remove,
            [path],
            self.inner.remove(path, options),
            |_| 0
        )
    }

    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        let call = self.inner.copy(source, destination, options);
        audited!(self, Copy, [source, destination], call, |_| 0)
    }

    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        let call = self.inner.rename(source, destination, options);
        audited!(self, Rename, [source, destination], call, |_| 0)
    }

    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<PathBuf> {
        audited!(self, ReadLink, [path], self.inner.read_link(path), |_| 0)
    }

    async fn create_symlink(&self, path: &AbsolutePathBuf, target: &Path) -> FileSystemResult<()> {
        let call = self.inner.create_symlink(path, target);
        audited!(self, CreateSymlink, [path, target], call, |_| 0)
    }

    async fn read_file_range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> FileSystemResult<Vec<u8>> {
        let call = self.inner.read_file_range(path, offset, length);
        audited!(self, ReadFileRange, [path], call, |d| d.len() as u64)
    }

    async fn narrowed(&self, dirs: &[RootDescription]) -> FileSystemResult<Narrowed> {
        let paths: Vec<String> = dirs.iter().map(|d| d.path.to_string()).collect();
        let started = Instant::now();
        let result = self.inner.narrowed(dirs).await;
        self.line(Operation::Narrowed, &paths, started, &result, 0);
        let mut narrowed = result?;
        narrowed.fs = Arc::new(self.around(narrowed.fs));
        Ok(narrowed)
    }

    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        let call = self.inner.walk(path, options);
        audited!(self, Walk, [path], call, |w| w.entries.len() as u64)
    }
}
