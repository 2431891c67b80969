//! `capfs get` and `capfs put`: stream between a local file and the sandbox with bounded memory,
//! and a progress bar when stderr is a terminal.

use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::AsyncWriteExt;

use capfs::{AbsolutePathBuf, ExecutorFileSystem, LocalFileSystem, RemoteFileSystem};

/// The file system the client subcommands work on.
pub enum Backend {
    Local(LocalFileSystem),
    Remote(RemoteFileSystem),
}

impl Backend {
    pub fn file_system(&self) -> &dyn ExecutorFileSystem {
        match self {
            Backend::Local(fs) => fs,
            Backend::Remote(fs) => fs,
        }
    }
}

fn progress_bar(len: u64) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// A temporary file beside `destination`, renamed over it by [`Staged::commit`] and removed if
/// dropped uncommitted, so an interrupted `get` never leaves a half-written destination.
struct Staged {
    temp: PathBuf,
    destination: PathBuf,
    committed: bool,
}

impl Staged {
    fn new(destination: &Path) -> io::Result<Self> {
        let name = destination.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: destination has no file name", destination.display()),
            )
        })?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".capfs-{}.part", std::process::id()));
        Ok(Self {
            temp: destination.with_file_name(temp_name),
            destination: destination.to_path_buf(),
            committed: false,
        })
    }

    fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.temp, &self.destination)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// A local file written synchronously from `poll_write`. The CLI's runtime has nothing else to do
/// while a transfer runs, and a page-cache write of one chunk takes microseconds, so this is
/// cheaper than `tokio::fs::File`, which hands every write to the blocking pool.
struct DirectFile(std::fs::File);

impl tokio::io::AsyncWrite for DirectFile {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::task::Poll::Ready(io::Write::write(&mut self.0, buf))
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(io::Write::flush(&mut self.0))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Copies the sandbox file `source` to the local file `destination`.
pub async fn get(
    backend: &Backend,
    source: &AbsolutePathBuf,
    destination: &Path,
) -> io::Result<()> {
    let staged = Staged::new(destination)?;
    let mut out = DirectFile(std::fs::File::create(&staged.temp)?);
    let fs = backend.file_system();
    let size = fs.get_metadata(source).await?.size;
    let bar = progress_bar(size);
    fs.read_file_to(source, &mut out, &mut |n| bar.set_position(n))
        .await?;
    bar.finish_and_clear();
    out.flush().await?;
    drop(out);
    staged.commit()
}

/// Copies the local file `source` to the sandbox path `destination`.
pub async fn put(
    backend: &Backend,
    source: &Path,
    destination: &AbsolutePathBuf,
) -> io::Result<()> {
    let mut input = tokio::fs::File::open(source).await?;
    let size = input.metadata().await?.len();
    let bar = progress_bar(size);
    backend
        .file_system()
        .write_file_from(
            destination,
            &mut input,
            Some(size),
            capfs::WriteOptions::default(),
            &mut |n| bar.set_position(n),
        )
        .await?;
    bar.finish_and_clear();
    Ok(())
}
