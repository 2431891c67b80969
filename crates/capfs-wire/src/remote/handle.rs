//! [`RemoteFileSystem`] itself: the handle on one connection's client, and what it tells of
//! the server it reached. The trait's methods are in `mod.rs`, the streamed and ranged reads
//! and writes beside it.

use std::io;
use std::sync::Arc;

use crate::encoding::STANDARD;
use base64::Engine;

use super::client::Client;
use super::reply::Empty;
use crate::protocol::{FS_WRITE_FILE_METHOD, RootDescription, WriteFileParams};
use capfs::{AbsolutePathBuf, WriteOptions};

/// An [`ExecutorFileSystem`](capfs::ExecutorFileSystem) served by a remote `capfs serve`.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use capfs::{AbsolutePathBuf, ExecutorFileSystem};
/// use capfs_wire::{RemoteFileSystem, RemoteOptions};
///
/// let fs = RemoteFileSystem::connect("ws://127.0.0.1:4000", RemoteOptions::default()).await?;
/// let data = fs.read_file(&AbsolutePathBuf::try_from("/ws/a.txt")?).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RemoteFileSystem {
    pub(super) client: Arc<Client>,
}

impl RemoteFileSystem {
    /// True when the server offers capfs's data frames, so large files move without base64 and
    /// without a bound on their size.
    pub fn supports_data_frames(&self) -> bool {
        self.client.data_frames
    }

    /// The sandbox roots the server announced in `initialize` (empty for a server that does
    /// not announce them).
    pub fn roots(&self) -> &[RootDescription] {
        &self.client.roots
    }

    /// `fs/writeFile`, with the capfs params when the server takes them.
    pub(super) async fn write_inline(
        &self,
        path: &AbsolutePathBuf,
        contents: Vec<u8>,
        options: WriteOptions,
    ) -> io::Result<()> {
        let options = self.client.capfs_options(options);
        let params = WriteFileParams {
            path: path.clone().into(),
            data_base64: STANDARD.encode(&contents),
            mode: options.mode,
            modified_at_ms: options.modified_at_ms,
            sandbox: None,
        };
        let _: Empty = self.client.call(FS_WRITE_FILE_METHOD, params).await?;
        Ok(())
    }

    /// True when the connection is gone; every call then fails with `BrokenPipe`.
    pub fn is_closed(&self) -> bool {
        self.client
            .pending
            .lock()
            .expect("pending map lock")
            .is_none()
    }
}
