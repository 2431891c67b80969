//! `fs/open` handles of one connection: read handles are a descriptor read at any offset;
//! replace handles feed a streamed atomic write, so the path shows the old file until
//! `fs/close` and a handle that is abandoned (not closed, or its connection gone) leaves the old
//! file and no temporary behind.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error;
use crate::server::outgoing::read_cached;
use capfs::{AbsolutePathBuf, ExecutorFileSystem, WriteOptions};

/// The least a block's buffer grows by when the file grew past what it held when the read
/// began.
const GROWTH_BYTES: usize = 64 * 1024;

/// Handles one connection may hold open, as codex's own executor bounds them.
pub(crate) const MAX_HANDLES_PER_CONNECTION: usize = 128;
/// The longest handle id a client may choose.
pub(crate) const MAX_HANDLE_ID_BYTES: usize = 32;
/// The largest block one `fs/readBlock` returns.
pub(crate) const MAX_BLOCK_BYTES: u64 = 1024 * 1024;
/// Blocks a replace handle queues ahead of the disk.
const QUEUED_BLOCKS: usize = 2;

enum Handle {
    Read(Arc<std::fs::File>),
    Replace(tokio::sync::Mutex<Replace>),
}

struct Replace {
    blocks: Option<mpsc::Sender<Vec<u8>>>,
    written: u64,
    write: Option<JoinHandle<io::Result<u64>>>,
}

struct Entry {
    handle: Arc<Handle>,
    _slot: OwnedSemaphorePermit,
}

/// The open handles of one connection.
pub(crate) struct Handles {
    open: Mutex<HashMap<String, Entry>>,
    /// Handles open across the server: each read handle holds a descriptor.
    server: Arc<Semaphore>,
}

fn too_many_handles() -> io::Error {
    error::too_many_handles(MAX_HANDLES_PER_CONNECTION)
}

impl Handles {
    pub(crate) fn new(server: Arc<Semaphore>) -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
            server,
        }
    }

    fn take_slot(&self, id: &str) -> io::Result<OwnedSemaphorePermit> {
        if id.is_empty() || id.len() > MAX_HANDLE_ID_BYTES {
            return Err(error::bad_handle_id(MAX_HANDLE_ID_BYTES));
        }
        let open = self.open.lock().expect("handle table");
        if open.contains_key(id) {
            return Err(error::handle_exists(id));
        }
        if open.len() >= MAX_HANDLES_PER_CONNECTION {
            return Err(too_many_handles());
        }
        Arc::clone(&self.server)
            .try_acquire_owned()
            .map_err(|_| error::handles_busy())
    }

    fn insert(&self, id: String, handle: Handle, slot: OwnedSemaphorePermit) -> io::Result<()> {
        let mut open = self.open.lock().expect("handle table");
        if open.contains_key(&id) {
            return Err(error::handle_exists(&id));
        }
        // Checked again: opens that ran at once each passed the first check.
        if open.len() >= MAX_HANDLES_PER_CONNECTION {
            return Err(too_many_handles());
        }
        let handle = Arc::new(handle);
        open.insert(
            id,
            Entry {
                handle,
                _slot: slot,
            },
        );
        Ok(())
    }

    fn get(&self, id: &str) -> io::Result<Arc<Handle>> {
        let open = self.open.lock().expect("handle table");
        open.get(id)
            .map(|entry| Arc::clone(&entry.handle))
            .ok_or_else(|| error::unknown_handle(id))
    }

    /// Opens `path` for block reads under `id`.
    pub(crate) async fn open_read(
        &self,
        fs: &dyn ExecutorFileSystem,
        id: String,
        path: &AbsolutePathBuf,
    ) -> io::Result<()> {
        let slot = self.take_slot(&id)?;
        let file = fs.open_file(path).await?;
        self.insert(id, Handle::Read(Arc::new(file)), slot)
    }

    /// Opens `path` for replacement under `id`: the write is staged now (so a missing parent or
    /// a read-only root fails here) and committed on [`close`](Self::close).
    pub(crate) async fn open_replace(
        &self,
        fs: Arc<dyn ExecutorFileSystem>,
        id: String,
        path: AbsolutePathBuf,
    ) -> io::Result<()> {
        let slot = self.take_slot(&id)?;
        let (blocks, receiver) = mpsc::channel(QUEUED_BLOCKS);
        let (started, staged) = oneshot::channel();
        let mut reader = Blocks {
            receiver,
            current: Vec::new(),
            at: 0,
            started: Some(started),
            ended: false,
        };
        let mut write = tokio::spawn(async move {
            let options = WriteOptions::default();
            fs.write_file_from(&path, &mut reader, None, options, &mut |_| {})
                .await
        });
        // The write reads its first block only once its temporary file exists: either that, or
        // the reason it could not begin.
        tokio::select! {
            biased;
            Ok(()) = staged => {}
            result = &mut write => {
                let error = match result {
                    Ok(Err(error)) => error,
                    Ok(Ok(_)) => error::write_ended_before_first_block(),
                    Err(error) => error::write_failed(error),
                };
                return Err(error);
            }
        }
        let replace = Replace {
            blocks: Some(blocks),
            written: 0,
            write: Some(write),
        };
        self.insert(id, Handle::Replace(tokio::sync::Mutex::new(replace)), slot)
    }

    /// Up to `len` bytes at `offset` of read handle `id`, and whether they reach the end.
    pub(crate) async fn read_block(
        &self,
        id: &str,
        offset: u64,
        len: u64,
    ) -> io::Result<(Vec<u8>, bool)> {
        if !(1..=MAX_BLOCK_BYTES).contains(&len) {
            return Err(error::bad_block_length(MAX_BLOCK_BYTES));
        }
        let Handle::Read(file) = &*self.get(id)? else {
            return Err(error::not_open_for(id, "reading"));
        };
        let file = Arc::clone(file);
        let len = len as usize;
        // What the page cache holds is read here, as a streamed read's frames are
        // (`outgoing.rs`): a block costs no hand-off to the blocking pool and back. What would
        // wait on the disk is read there. The buffer is zeroed for the reads, so it starts at
        // what the file holds past `offset` now, and grows only if the file grew meanwhile: a
        // block of 1 MiB asked of a small file zeroes no megabyte.
        let held = file.metadata()?.len().saturating_sub(offset);
        let mut data = vec![0u8; usize::try_from(held).map_or(len, |held| held.min(len))];
        let mut filled = 0;
        let mut ended = false;
        while !ended {
            if filled == data.len() {
                if filled == len {
                    break;
                }
                data.resize(filled.saturating_mul(2).max(GROWTH_BYTES).min(len), 0);
            }
            let at = offset.saturating_add(filled as u64);
            match read_cached(&file, &mut data[filled..], at)? {
                Some(0) => ended = true,
                Some(n) => filled += n,
                None => break,
            }
        }
        if filled < len && !ended {
            data.resize(len, 0);
            let pool_file = Arc::clone(&file);
            (data, filled) = tokio::task::spawn_blocking(move || {
                let filled = fill(&pool_file, &mut data, filled, offset)?;
                Ok::<_, io::Error>((data, filled))
            })
            .await
            .map_err(error::block_read_failed)??;
        }
        data.truncate(filled);
        let size = file.metadata()?.len();
        let eof = filled < len || offset.saturating_add(filled as u64) >= size;
        Ok((data, eof))
    }

    /// Appends `chunk` to replace handle `id`; `offset` must be what was written so far.
    pub(crate) async fn write_block(
        &self,
        id: &str,
        offset: u64,
        chunk: Vec<u8>,
    ) -> io::Result<()> {
        let handle = self.get(id)?;
        let Handle::Replace(replace) = &*handle else {
            return Err(error::not_open_for(id, "writing"));
        };
        let mut replace = replace.lock().await;
        if offset != replace.written {
            return Err(error::block_out_of_order(id, offset, replace.written));
        }
        if chunk.is_empty() {
            // Nothing to write; an empty block on the queue would end the file.
            return Ok(());
        }
        let len = chunk.len() as u64;
        let sent = match &replace.blocks {
            Some(blocks) => blocks.send(chunk).await.is_ok(),
            None => false,
        };
        if !sent {
            // The write ended early: its error is the answer.
            replace.blocks = None;
            return Err(match finish(&mut replace).await {
                Err(error) => error,
                Ok(()) => error::handle_write_ended(id),
            });
        }
        replace.written += len;
        Ok(())
    }

    /// Closes handle `id`; a replace handle's file replaces its path now.
    pub(crate) async fn close(&self, id: &str) -> io::Result<()> {
        let entry = self
            .open
            .lock()
            .expect("handle table")
            .remove(id)
            .ok_or_else(|| error::unknown_handle(id))?;
        if let Handle::Replace(replace) = &*entry.handle {
            let mut replace = replace.lock().await;
            if let Some(blocks) = replace.blocks.take() {
                // An empty block is the end: the reader gives the write its end of input.
                let _ = blocks.send(Vec::new()).await;
            }
            finish(&mut replace).await?;
        }
        Ok(())
    }
}

async fn finish(replace: &mut Replace) -> io::Result<()> {
    let Some(write) = replace.write.take() else {
        return Err(error::write_already_ended());
    };
    match write.await {
        Ok(result) => result.map(|_| ()),
        Err(error) => Err(error::write_failed(error)),
    }
}

/// Fills `data` from `filled` on with the file's bytes from `offset + filled`, until it is full
/// or the file ends; returns how much of it is filled.
fn fill(
    file: &std::fs::File,
    data: &mut [u8],
    mut filled: usize,
    offset: u64,
) -> io::Result<usize> {
    while filled < data.len() {
        let at = offset.saturating_add(filled as u64);
        match rustix::io::pread(file, &mut data[filled..], at) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(filled)
}

/// The blocks of a replace handle as the reader a streamed write takes. An empty block ends the
/// input; a sender dropped without one (the handle abandoned) is an error, so the write leaves
/// the old file.
struct Blocks {
    receiver: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    started: Option<oneshot::Sender<()>>,
    /// The end was read: every later read is the end again.
    ended: bool,
}

impl AsyncRead for Blocks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(started) = this.started.take() {
            let _ = started.send(());
        }
        loop {
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            if this.at < this.current.len() {
                let n = buf.remaining().min(this.current.len() - this.at);
                buf.put_slice(&this.current[this.at..this.at + n]);
                this.at += n;
                return Poll::Ready(Ok(()));
            }
            match this.receiver.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(block)) if block.is_empty() => this.ended = true,
                Poll::Ready(Some(block)) => {
                    this.current = block;
                    this.at = 0;
                }
                Poll::Ready(None) => {
                    return Poll::Ready(Err(error::handle_abandoned()));
                }
            }
        }
    }
}
