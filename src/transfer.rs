//! `get`, `put` and `cat`: files and trees between the local disk and the sandbox, streamed with
//! bounded memory.
//!
//! Local destinations are written the way a person expects of `cp`: `-` is stdout, a symlink is
//! written through to its target, a FIFO or a device is written in place, and a regular file is
//! replaced atomically through a temporary file (removed again if the transfer fails or is
//! interrupted). Sources of unknown size (`-`, pipes, devices) are streamed until they end.

use std::fs::{self, Permissions};
use std::io::{self, IsTerminal};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

use capfs::{
    AbsolutePathBuf, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata, WriteOptions,
};

mod local;
mod tree;

use local::{Announced, Direct, Sink, Source, permission_bits};
use tree::{Node, local_tree, sandbox_tree, totals};

use crate::args::TransferArgs;
use crate::fail::{EXIT_BROKEN_PIPE, EXIT_FAILURE, Failure};
use crate::names::{quote, sanitize};

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

/// One file from the sandbox to a local destination; returns the bytes copied.
async fn get_file(
    fs: &dyn ExecutorFileSystem,
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
        Err(e) => return Err(Failure::at_path("cannot read", source, &e)),
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
    fs: &dyn ExecutorFileSystem,
    source: &Path,
    destination: &AbsolutePathBuf,
    options: TransferArgs,
    progress: &mut Progress,
) -> Result<u64, Failure> {
    let shown = source.to_string_lossy();
    let mut input = Source::open(source)
        .await
        .map_err(|e| Failure::at("cannot open local file", &shown, &e))?;
    let write_options = WriteOptions::default()
        .with_mode(input.mode)
        .with_modified_at_ms(if options.preserve {
            input.modified_at_ms
        } else {
            None
        });
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
        .map_err(|e| Failure::at_path("cannot write", destination, &e))?;
    progress.file_done(written);
    Ok(written)
}

/// `cat`: each sandbox file to stdout, in order; `-` copies stdin.
pub async fn cat(
    fs: &dyn ExecutorFileSystem,
    paths: &[Option<AbsolutePathBuf>],
) -> Result<(), Failure> {
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

/// One `get` source, a file or (with `-r`) a tree, to `destination`, which is the final name.
pub async fn get(
    fs: &dyn ExecutorFileSystem,
    sources: &[(AbsolutePathBuf, PathBuf)],
    options: TransferArgs,
) -> Result<(), Failure> {
    let mut plans = Vec::new();
    let mut warnings = Vec::new();
    for (source, destination) in sources {
        let metadata = fs
            .get_metadata(source)
            .await
            .map_err(|e| Failure::at_path("cannot stat", source, &e))?;
        if metadata.is_directory {
            if !options.recursive {
                return Err(Failure::plain(
                    format!("{}: is a directory (use -r)", quote(&source.to_string())),
                    EXIT_FAILURE,
                ));
            }
            let nodes = sandbox_tree(fs, source, metadata.mode, &mut warnings).await?;
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
    fs: &dyn ExecutorFileSystem,
    sources: &[(PathBuf, AbsolutePathBuf)],
    options: TransferArgs,
) -> Result<(), Failure> {
    let mut plans = Vec::new();
    let mut warnings = Vec::new();
    for (source, destination) in sources {
        let directory = if source.as_os_str() == "-" {
            None
        } else {
            fs::metadata(source).ok().filter(fs::Metadata::is_dir)
        };
        if let Some(directory) = directory {
            if !options.recursive {
                return Err(Failure::plain(
                    format!(
                        "{}: is a directory (use -r)",
                        quote(&source.to_string_lossy())
                    ),
                    EXIT_FAILURE,
                ));
            }
            let mode = directory.permissions().mode();
            let nodes = local_tree(source, mode, &mut warnings).await?;
            plans.push((source, destination, Some(nodes)));
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
                    fs.create_directory(
                        &remote,
                        CreateDirectoryOptions::default().with_recursive(true),
                    )
                    .await
                    .map_err(|e| Failure::at_path("cannot create directory", &remote, &e))?;
                }
                Node::File { rel, .. } => {
                    let remote = destination.join(&rel).expect("relative names hold no NUL");
                    put_file(fs, &source.join(&rel), &remote, options, &mut progress).await?;
                }
                Node::Symlink { rel, target } => {
                    let remote = destination.join(&rel).expect("relative names hold no NUL");
                    fs.create_symlink(&remote, &target)
                        .await
                        .map_err(|e| Failure::at_path("cannot create symlink", &remote, &e))?;
                }
            }
        }
    }
    progress.finish("put");
    Ok(())
}
