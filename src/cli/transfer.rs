//! `get`, `put` and `cat`: files and trees between the local disk and the sandbox, streamed with
//! bounded memory.
//!
//! Local destinations are written the way a person expects of `cp`: `-` is stdout, a symlink is
//! written through to its target, a FIFO or a device is written in place, and a regular file is
//! replaced atomically through a temporary file (removed again if the transfer fails or is
//! interrupted). Sources of unknown size (`-`, pipes, devices) are streamed until they end.

use std::fs::{self, File, Permissions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use tokio::io::{AsyncRead, AsyncWrite};

use capfs::{
    AbsolutePathBuf, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, LocalFileSystem,
    RemoteFileSystem, WriteOptions,
};

use crate::args::TransferArgs;
use crate::fail::{EXIT_BROKEN_PIPE, EXIT_FAILURE, Failure};
use crate::names::{escape, quote, sanitize};

/// Deepest tree `get -r` copies: deeper than anything a person copies, and far below the
/// length at which local paths stop working.
const MAX_TREE_DEPTH: usize = 1_024;
/// Most entries of a tree `get -r` plans (the plan holds each one's name and metadata).
const MAX_TREE_ENTRIES: usize = 1_000_000;

/// Symlinks followed at a local destination before giving up, as the kernel does.
const MAX_LINK_HOPS: usize = 40;

/// The file system the client subcommands work on.
pub enum Backend {
    Local(LocalFileSystem),
    Remote(RemoteFileSystem),
}

impl std::ops::Deref for Backend {
    type Target = dyn ExecutorFileSystem;

    fn deref(&self) -> &Self::Target {
        match self {
            Backend::Local(fs) => fs,
            Backend::Remote(fs) => fs,
        }
    }
}

/// Permission bits a transfer gives a file: never setuid, setgid or sticky.
fn permission_bits(mode: u32) -> u32 {
    mode & 0o777
}

fn millis(time: SystemTime) -> Option<i64> {
    let after = time.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(after.as_millis()).ok()
}

/// The progress display and the counters behind the summary line.
pub struct Progress {
    bar: ProgressBar,
    files: u64,
    bytes: u64,
    total_files: u64,
    started: Instant,
    quiet: bool,
    skipped: u64,
}

impl Progress {
    /// A display over `total_files` files and `total_bytes` bytes: drawn only on a terminal
    /// and never with `quiet`.
    pub fn new(total_files: u64, total_bytes: u64, quiet: bool) -> Self {
        let bar = if quiet || !io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::new(total_bytes);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            ) {
                bar.set_style(style);
            }
            bar
        };
        let progress = Self {
            bar,
            files: 0,
            bytes: 0,
            total_files,
            started: Instant::now(),
            quiet,
            skipped: 0,
        };
        progress.show_files();
        progress
    }

    fn show_files(&self) {
        self.bar
            .set_message(format!("{}/{} files", self.files, self.total_files));
    }

    fn file_done(&mut self, bytes: u64) {
        self.files += 1;
        self.bytes += bytes;
        self.bar.set_position(self.bytes);
        self.show_files();
    }

    /// Reports a skipped entry on stderr without tearing the display.
    fn warn(&mut self, message: &str) {
        self.skipped += 1;
        let message = sanitize(message);
        self.bar.suspend(|| eprintln!("capfs: warning: {message}"));
    }

    /// Clears the display and prints the summary line (unless quiet).
    pub fn finish(&self, verb: &str) {
        self.bar.finish_and_clear();
        if self.quiet {
            return;
        }
        let elapsed = self.started.elapsed().max(Duration::from_millis(1));
        let rate = (self.bytes as f64 / elapsed.as_secs_f64()) as u64;
        let files = if self.files == 1 { "file" } else { "files" };
        let skipped = if self.skipped > 0 {
            format!(", {} skipped", self.skipped)
        } else {
            String::new()
        };
        eprintln!(
            "{verb} {} {files}, {} in {:.1}s ({}/s){skipped}",
            self.files,
            HumanBytes(self.bytes),
            elapsed.as_secs_f64(),
            HumanBytes(rate),
        );
    }
}

/// A synchronous reader or writer behind `AsyncRead`/`AsyncWrite`: the client's runtime has
/// nothing else to do while a transfer runs, and a page-cache read or write takes microseconds,
/// so this is cheaper than `tokio::fs::File`, which hands every call to the blocking pool and
/// copies through a buffer of its own (a `put` of 256 MiB took 0.20-0.23 s this way against
/// 0.28-0.38 s through `tokio::fs::File`, alternated in one run).
/// It remembers whether a write failed, so that a failed stream is blamed on the right side.
struct Direct<W> {
    inner: W,
    failed: bool,
}

impl<W: Write + Unpin> Direct<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            failed: false,
        }
    }
}

impl<W: Write + Unpin> AsyncWrite for Direct<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let result = self.inner.write(buf);
        self.failed |= result.is_err();
        std::task::Poll::Ready(result)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let result = self.inner.flush();
        self.failed |= result.is_err();
        std::task::Poll::Ready(result)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl<R: std::io::Read + Unpin> AsyncRead for Direct<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let n = self.inner.read(buf.initialize_unfilled())?;
        buf.advance(n);
        std::task::Poll::Ready(Ok(()))
    }
}

/// A writer that takes at most `left` bytes: a file that brings more than its metadata
/// announced (a lying server, or a file that grew meanwhile) fails instead of filling the disk.
struct Announced<W> {
    inner: W,
    announced: u64,
    left: u64,
    exceeded: bool,
}

impl<W> Announced<W> {
    fn new(inner: W, announced: u64) -> Self {
        Self {
            inner,
            announced,
            left: announced,
            exceeded: false,
        }
    }

    fn failure(&self, source: &AbsolutePathBuf) -> Failure {
        Failure::plain(
            format!(
                "cannot read {}: more than the {} bytes announced by its metadata arrived",
                quote(&source.to_string()),
                self.announced
            ),
            EXIT_FAILURE,
        )
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Announced<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if buf.len() as u64 > self.left {
            self.exceeded = true;
            return std::task::Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "more data than announced",
            )));
        }
        let this = &mut *self;
        let result = std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &result {
            this.left -= *n as u64;
        }
        result
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Where a local destination's bytes go.
enum Sink {
    /// Our own stdout (`-`, or a path that is the same file as stdout, like `/dev/stdout`).
    Stdout,
    /// A FIFO, a device or a socket: written to, never replaced.
    InPlace(File),
    /// A regular file (or none yet) at `target`, the end of any symlinks: a temporary file
    /// beside it, renamed over it when complete and removed if dropped before.
    Replace {
        temp: tempfile::NamedTempFile,
        target: PathBuf,
        existing: Option<Permissions>,
    },
}

/// True when `metadata` is the same file as this process's stdout.
fn is_stdout(metadata: &fs::Metadata) -> bool {
    rustix::fs::fstat(io::stdout())
        .is_ok_and(|st| st.st_dev == metadata.dev() && st.st_ino == metadata.ino())
}

/// Follows symlinks at the last component of `path` to the name that is finally written.
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let text = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(parent) if text.is_relative() => parent.join(text),
                    _ => text,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(
        rustix::io::Errno::LOOP.raw_os_error(),
    ))
}

impl Sink {
    /// The sink for `destination`. `in_tree`: the destination is inside a tree `get -r`
    /// writes, where a symlink is replaced rather than followed, since the remote side may
    /// have made it (a link to `~/.bashrc` in one run, a file of that name in the next).
    fn open(destination: &Path, in_tree: bool) -> io::Result<Self> {
        if destination.as_os_str() == "-" {
            return Ok(Sink::Stdout);
        }
        if in_tree && fs::symlink_metadata(destination).is_ok_and(|m| m.file_type().is_symlink()) {
            return Self::replacing(destination.to_path_buf(), None);
        }
        match fs::metadata(destination) {
            Ok(m) if is_stdout(&m) => return Ok(Sink::Stdout),
            Ok(m) if m.is_dir() => {
                return Err(io::Error::from(io::ErrorKind::IsADirectory));
            }
            Ok(m) if !m.is_file() => {
                let t = m.file_type();
                if t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket() {
                    let file = fs::OpenOptions::new().write(true).open(destination)?;
                    return Ok(Sink::InPlace(file));
                }
            }
            _ => {}
        }
        let target = follow_links(destination)?;
        let existing = fs::metadata(&target).ok().map(|m| m.permissions());
        Self::replacing(target, existing)
    }

    /// A temporary file beside `target`, to be renamed over it.
    fn replacing(target: PathBuf, existing: Option<Permissions>) -> io::Result<Self> {
        let dir = match target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let temp = tempfile::NamedTempFile::new_in(dir).map_err(without_temp_path)?;
        Ok(Sink::Replace {
            temp,
            target,
            existing,
        })
    }

    /// Completes the write: the replacement gets `mode` (else the old file's bits, else the
    /// default for a new file) and, when given, the modification time, then takes the name.
    fn commit(self, mode: Option<u32>, modified_at_ms: Option<i64>) -> io::Result<()> {
        let Sink::Replace {
            temp,
            target,
            existing,
        } = self
        else {
            return Ok(());
        };
        let permissions = match (mode, existing) {
            (Some(mode), _) if mode != 0 => Permissions::from_mode(permission_bits(mode)),
            (_, Some(existing)) => existing,
            _ => Permissions::from_mode(0o666 & !current_umask()),
        };
        temp.as_file().set_permissions(permissions)?;
        if let Some(ms) = modified_at_ms {
            temp.as_file().set_modified(time_of(ms))?;
        }
        temp.persist(&target).map_err(|e| e.error)?;
        Ok(())
    }
}

/// tempfile appends its random temporary path to errors (`... at path "/d/.tmpXYZ"`); the
/// message names the destination instead, so keep only the reason.
fn without_temp_path(err: io::Error) -> io::Error {
    let text = err.to_string();
    match text.split_once(" at path ") {
        Some((reason, _)) => io::Error::new(err.kind(), reason.to_string()),
        None => err,
    }
}

fn time_of(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

/// The process's umask (read by setting it and putting it back).
fn current_umask() -> u32 {
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    old.as_raw_mode()
}

/// What a local source is: its reader, size when known, permission bits and mtime.
struct Source {
    reader: Box<dyn AsyncRead + Unpin + Send>,
    size: Option<u64>,
    mode: Option<u32>,
    modified_at_ms: Option<i64>,
}

impl Source {
    async fn open(path: &Path) -> io::Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self {
                reader: Box::new(tokio::io::stdin()),
                size: None,
                mode: None,
                modified_at_ms: None,
            });
        }
        let file = tokio::fs::File::open(path).await?;
        let metadata = file.metadata().await?;
        if metadata.is_dir() {
            return Err(io::Error::from(io::ErrorKind::IsADirectory));
        }
        // A pipe, `/dev/stdin` or a device says size 0 (or nothing useful): read to the end.
        let size = metadata.is_file().then_some(metadata.len());
        // A regular file is read in place; a pipe or a device through tokio, as its reads may
        // wait for a writer.
        let reader: Box<dyn AsyncRead + Unpin + Send> = if metadata.is_file() {
            Box::new(Direct::new(file.into_std().await))
        } else {
            Box::new(file)
        };
        Ok(Self {
            reader,
            size,
            mode: Some(permission_bits(metadata.permissions().mode())),
            modified_at_ms: metadata.modified().ok().and_then(millis),
        })
    }
}

/// One file from the sandbox to a local destination; returns the bytes copied.
async fn get_file(
    fs: &Backend,
    source: &AbsolutePathBuf,
    metadata: &FileMetadata,
    destination: &Path,
    in_tree: bool,
    options: TransferArgs,
    progress: &mut Progress,
) -> Result<u64, Failure> {
    let shown = destination.to_string_lossy();
    let local = |e: io::Error| Failure::at("cannot create local file", &shown, &e);
    let mut sink = Sink::open(destination, in_tree).map_err(local)?;
    let base = progress.bytes;
    let bar = progress.bar.clone();
    let mut on_progress = |n: u64| bar.set_position(base + n);
    let size = metadata.size;
    let (result, local_failed, exceeded) = match &mut sink {
        Sink::Stdout => {
            let mut out = Announced::new(Direct::new(io::stdout()), size);
            let result = fs.read_file_to(source, &mut out, &mut on_progress).await;
            (
                result,
                out.inner.failed,
                out.exceeded.then(|| out.failure(source)),
            )
        }
        Sink::InPlace(file) => {
            let mut out = Announced::new(Direct::new(file), size);
            let result = fs.read_file_to(source, &mut out, &mut on_progress).await;
            (
                result,
                out.inner.failed,
                out.exceeded.then(|| out.failure(source)),
            )
        }
        Sink::Replace { temp, .. } => {
            let mut out = Announced::new(Direct::new(temp.as_file_mut()), size);
            let result = fs.read_file_to(source, &mut out, &mut on_progress).await;
            (
                result,
                out.inner.failed,
                out.exceeded.then(|| out.failure(source)),
            )
        }
    };
    if let Some(failure) = exceeded {
        return Err(failure);
    }
    let copied = match result {
        Ok(copied) => copied,
        Err(e) if local_failed => return Err(local_write_failure(&e, &shown)),
        Err(e) => return Err(Failure::at("cannot read", &source.to_string(), &e)),
    };
    let mtime = options.preserve.then_some(metadata.modified_at_ms);
    sink.commit(Some(metadata.mode), mtime).map_err(local)?;
    progress.file_done(copied);
    Ok(copied)
}

/// A failed stream blames the side whose error it is: a local write error names the local
/// path, anything else the sandbox path.
/// A local write that failed. A reader that went away (`capfs cat f | head -1`) ends the
/// client quietly with the status a SIGPIPE death gives, as coreutils' tools end.
fn local_write_failure(err: &io::Error, local: &str) -> Failure {
    if err.kind() == io::ErrorKind::BrokenPipe {
        return Failure::quiet(EXIT_BROKEN_PIPE);
    }
    Failure::at("cannot write local file", local, err)
}

/// One local file to a sandbox path; returns the bytes copied.
async fn put_file(
    fs: &Backend,
    source: &Path,
    destination: &AbsolutePathBuf,
    options: TransferArgs,
    progress: &mut Progress,
) -> Result<u64, Failure> {
    let shown = source.to_string_lossy();
    let mut input = Source::open(source)
        .await
        .map_err(|e| Failure::at("cannot open local file", &shown, &e))?;
    let write_options = WriteOptions {
        mode: input.mode,
        modified_at_ms: if options.preserve {
            input.modified_at_ms
        } else {
            None
        },
    };
    let base = progress.bytes;
    let bar = progress.bar.clone();
    let written = fs
        .write_file_from(
            destination,
            &mut input.reader,
            input.size,
            write_options,
            &mut |n| bar.set_position(base + n),
        )
        .await
        .map_err(|e| Failure::at("cannot write", &destination.to_string(), &e))?;
    progress.file_done(written);
    Ok(written)
}

/// `cat`: each sandbox file to stdout, in order; `-` copies stdin.
pub async fn cat(fs: &Backend, paths: &[Option<AbsolutePathBuf>]) -> Result<(), Failure> {
    for path in paths {
        let mut out = Direct::new(io::stdout());
        let (result, shown) = match path {
            None => {
                let mut stdin = tokio::io::stdin();
                (tokio::io::copy(&mut stdin, &mut out).await, "-".to_string())
            }
            Some(path) => (
                fs.read_file_to(path, &mut out, &mut |_| {}).await,
                path.to_string(),
            ),
        };
        match result {
            Ok(_) => {}
            Err(e) if out.failed => return Err(local_write_failure(&e, "stdout")),
            Err(e) => return Err(Failure::at("cannot read", &shown, &e)),
        }
    }
    Ok(())
}

/// An entry of a tree to copy, relative to the tree's top.
enum Node {
    Directory {
        rel: PathBuf,
        mode: u32,
    },
    /// `metadata`: the remote file's, as the plan saw it (local files are stat'ed when sent).
    File {
        rel: PathBuf,
        size: u64,
        metadata: Option<FileMetadata>,
    },
    Symlink {
        rel: PathBuf,
        target: PathBuf,
    },
}

/// The sandbox tree under `top`, parents before children; specials are warned about and left
/// out.
async fn remote_tree(
    fs: &Backend,
    top: &AbsolutePathBuf,
    top_mode: u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = top.join(&rel).expect("relative names hold no NUL");
        // A server can list a tree without end: the plan is bounded before it is used.
        if rel.components().count() >= MAX_TREE_DEPTH {
            return Err(Failure::plain(
                format!(
                    "{}: the tree is more than {MAX_TREE_DEPTH} levels deep; get -r copies no \
                     deeper",
                    quote(&top.to_string())
                ),
                EXIT_FAILURE,
            ));
        }
        let mut entries = fs
            .read_directory(&dir)
            .await
            .map_err(|e| Failure::at("cannot open directory", &dir.to_string(), &e))?;
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        if nodes.len() + entries.len() > MAX_TREE_ENTRIES {
            return Err(Failure::plain(
                format!(
                    "{}: the tree holds more than {MAX_TREE_ENTRIES} entries; get -r copies \
                     at most that many",
                    quote(&top.to_string())
                ),
                EXIT_FAILURE,
            ));
        }
        for entry in entries {
            // Names become local paths: one that is not a single plain component (a broken
            // or hostile server's `..` or `a/b`) would land outside the destination.
            // The exact name (a local listing's name that is not UTF-8 included), so that the
            // copy reaches this entry and no other.
            let name = entry.name();
            if !is_plain_name(name) {
                return Err(Failure::plain(
                    format!(
                        "{}: the server listed an invalid name {}",
                        quote(&dir.to_string()),
                        escape(name.as_bytes())
                    ),
                    EXIT_FAILURE,
                ));
            }
            let child_rel = rel.join(name);
            let child = top.join(&child_rel).expect("listed names hold no NUL");
            if entry.is_symlink {
                let target = fs
                    .read_link(&child)
                    .await
                    .map_err(|e| Failure::at("cannot read link", &child.to_string(), &e))?;
                nodes.push(Node::Symlink {
                    rel: child_rel,
                    target,
                });
            } else if entry.is_directory {
                let mode = fs.get_metadata(&child).await.map_or(0, |m| m.mode);
                nodes.push(Node::Directory {
                    rel: child_rel.clone(),
                    mode,
                });
                pending.push(child_rel);
            } else if entry.is_file {
                let metadata = fs
                    .get_metadata(&child)
                    .await
                    .map_err(|e| Failure::at("cannot stat", &child.to_string(), &e))?;
                nodes.push(Node::File {
                    rel: child_rel,
                    size: metadata.size,
                    metadata: Some(metadata),
                });
            } else {
                warnings.push(format!(
                    "skipping special file {}",
                    quote(&child.to_string())
                ));
            }
        }
    }
    Ok(nodes)
}

/// The local tree under `top`, parents before children; specials are warned about and left out.
fn local_tree(top: &Path, warnings: &mut Vec<String>) -> Result<Vec<Node>, Failure> {
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    let fail = |p: &Path, e: io::Error| Failure::at("cannot read local directory", &shown(p), &e);
    let top_mode = fs::metadata(top)
        .map_err(|e| fail(top, e))?
        .permissions()
        .mode();
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = top.join(&rel);
        let mut entries: Vec<fs::DirEntry> = fs::read_dir(&dir)
            .and_then(|it| it.collect::<io::Result<_>>())
            .map_err(|e| fail(&dir, e))?;
        entries.sort_by_key(fs::DirEntry::file_name);
        for entry in entries {
            let child_rel = rel.join(entry.file_name());
            let path = entry.path();
            let metadata = fs::symlink_metadata(&path).map_err(|e| fail(&path, e))?;
            let t = metadata.file_type();
            if t.is_symlink() {
                let target = fs::read_link(&path).map_err(|e| fail(&path, e))?;
                nodes.push(Node::Symlink {
                    rel: child_rel,
                    target,
                });
            } else if t.is_dir() {
                nodes.push(Node::Directory {
                    rel: child_rel.clone(),
                    mode: metadata.permissions().mode(),
                });
                pending.push(child_rel);
            } else if t.is_file() {
                nodes.push(Node::File {
                    rel: child_rel,
                    size: metadata.len(),
                    metadata: None,
                });
            } else {
                warnings.push(format!("skipping special file {}", quote(&shown(&path))));
            }
        }
    }
    Ok(nodes)
}

/// A name that is exactly one normal path component.
fn is_plain_name(name: &std::ffi::OsStr) -> bool {
    let mut components = Path::new(name).components();
    matches!(components.next(), Some(std::path::Component::Normal(_)))
        && components.next().is_none()
        && !name.as_bytes().contains(&b'/')
}

fn totals(nodes: &[Node]) -> (u64, u64) {
    nodes
        .iter()
        .fold((0, 0), |(files, bytes), node| match node {
            Node::File { size, .. } => (files + 1, bytes + size),
            _ => (files, bytes),
        })
}

/// One `get` source, a file or (with `-r`) a tree, to `destination`, which is the final name.
pub async fn get(
    fs: &Backend,
    sources: &[(AbsolutePathBuf, PathBuf)],
    options: TransferArgs,
) -> Result<(), Failure> {
    let mut plans = Vec::new();
    let mut warnings = Vec::new();
    for (source, destination) in sources {
        let metadata = fs
            .get_metadata(source)
            .await
            .map_err(|e| Failure::at("cannot stat", &source.to_string(), &e))?;
        if metadata.is_directory {
            if !options.recursive {
                return Err(Failure::plain(
                    format!("{}: is a directory (use -r)", quote(&source.to_string())),
                    EXIT_FAILURE,
                ));
            }
            let nodes = remote_tree(fs, source, metadata.mode, &mut warnings).await?;
            plans.push((source, destination, metadata, Some(nodes)));
        } else {
            plans.push((source, destination, metadata, None));
        }
    }
    let (files, bytes) = plans.iter().fold((0, 0), |(f, b), plan| match &plan.3 {
        Some(nodes) => {
            let (nf, nb) = totals(nodes);
            (f + nf, b + nb)
        }
        None => (f + 1, b + plan.2.size),
    });
    let mut progress = Progress::new(files, bytes, options.quiet);
    for warning in warnings {
        progress.warn(&warning);
    }
    for (source, destination, metadata, nodes) in plans {
        let Some(nodes) = nodes else {
            get_file(
                fs,
                source,
                &metadata,
                destination,
                false,
                options,
                &mut progress,
            )
            .await?;
            continue;
        };
        let mut directories = Vec::new();
        for node in nodes {
            match node {
                Node::Directory { rel, mode } => {
                    let local = destination.join(&rel);
                    match fs::create_dir(&local) {
                        Ok(()) => {}
                        // An existing directory is filled; a symlink to one is not followed.
                        Err(e)
                            if e.kind() == io::ErrorKind::AlreadyExists
                                && fs::symlink_metadata(&local).is_ok_and(|m| m.is_dir()) => {}
                        Err(e) => {
                            return Err(Failure::at(
                                "cannot create local directory",
                                &local.to_string_lossy(),
                                &e,
                            ));
                        }
                    }
                    directories.push((local, mode));
                }
                Node::File { rel, metadata, .. } => {
                    let remote = source.join(&rel).expect("relative names hold no NUL");
                    let m = metadata.unwrap_or_default();
                    get_file(
                        fs,
                        &remote,
                        &m,
                        &destination.join(&rel),
                        true,
                        options,
                        &mut progress,
                    )
                    .await?;
                }
                Node::Symlink { rel, target } => {
                    let local = destination.join(&rel);
                    std::os::unix::fs::symlink(&target, &local).map_err(|e| {
                        Failure::at("cannot create local symlink", &local.to_string_lossy(), &e)
                    })?;
                }
            }
        }
        // Directory modes last, so a read-only directory is filled before it becomes one.
        for (local, mode) in directories.into_iter().rev() {
            if mode != 0 {
                let _ = fs::set_permissions(&local, Permissions::from_mode(permission_bits(mode)));
            }
        }
    }
    progress.finish("got");
    Ok(())
}

/// `put`: each local source, a file or (with `-r`) a tree, to its sandbox name.
pub async fn put(
    fs: &Backend,
    sources: &[(PathBuf, AbsolutePathBuf)],
    options: TransferArgs,
) -> Result<(), Failure> {
    let mut plans = Vec::new();
    let mut warnings = Vec::new();
    for (source, destination) in sources {
        let is_dir = source.as_os_str() != "-" && fs::metadata(source).is_ok_and(|m| m.is_dir());
        if is_dir {
            if !options.recursive {
                return Err(Failure::plain(
                    format!(
                        "{}: is a directory (use -r)",
                        quote(&source.to_string_lossy())
                    ),
                    EXIT_FAILURE,
                ));
            }
            plans.push((
                source,
                destination,
                Some(local_tree(source, &mut warnings)?),
            ));
        } else {
            plans.push((source, destination, None));
        }
    }
    let (files, bytes) = plans.iter().fold((0, 0), |(f, b), plan| match &plan.2 {
        Some(nodes) => {
            let (nf, nb) = totals(nodes);
            (f + nf, b + nb)
        }
        None => (
            f + 1,
            b + fs::metadata(plan.0).map_or(0, |m| if m.is_file() { m.len() } else { 0 }),
        ),
    });
    let mut progress = Progress::new(files, bytes, options.quiet);
    for warning in warnings {
        progress.warn(&warning);
    }
    for (source, destination, nodes) in plans {
        let Some(nodes) = nodes else {
            put_file(fs, source, destination, options, &mut progress).await?;
            continue;
        };
        for node in nodes {
            match node {
                Node::Directory { rel, .. } => {
                    let remote = destination.join(&rel).expect("relative names hold no NUL");
                    fs.create_directory(&remote, CreateDirectoryOptions { recursive: true })
                        .await
                        .map_err(|e| {
                            Failure::at("cannot create directory", &remote.to_string(), &e)
                        })?;
                }
                Node::File { rel, .. } => {
                    let remote = destination.join(&rel).expect("relative names hold no NUL");
                    put_file(fs, &source.join(&rel), &remote, options, &mut progress).await?;
                }
                Node::Symlink { rel, target } => {
                    let remote = destination.join(&rel).expect("relative names hold no NUL");
                    fs.create_symlink(&remote, &target).await.map_err(|e| {
                        Failure::at("cannot create symlink", &remote.to_string(), &e)
                    })?;
                }
            }
        }
    }
    progress.finish("put");
    Ok(())
}
