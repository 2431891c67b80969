//! Ranges of files: `capfs/readFileRange` when the server offers it, else the file streamed and
//! only the range kept. Small files are read whole the same way (see [`SMALL_READ_BYTES`]).

use std::io;

use crate::encoding::STANDARD;
use base64::Engine;

use super::handle::RemoteFileSystem;
use crate::protocol::{CAPFS_READ_FILE_RANGE_METHOD, ReadFileResponse, ReadRangeParams};
use capfs::AbsolutePathBuf;

/// The most bytes asked for in one `capfs/readFileRange` request; longer ranges take several.
const RANGE_REQUEST_BYTES: u64 = 4 * 1024 * 1024;

/// Whole-file reads first ask for this many bytes and one more by one `capfs/readFileRange`:
/// a file that fits comes back in that one reply, where a streamed read takes a data frame, its
/// reply and a stream registered on both sides (1.3x the raw client's `fs/readFile` at 64 in
/// flight, `cargo bench --bench capfs -- client`). A larger file costs that reply more and is
/// then streamed from its start.
pub(super) const SMALL_READ_BYTES: u64 = 16 * 1024;

impl RemoteFileSystem {
    /// [`ExecutorFileSystem::read_file_range`](capfs::ExecutorFileSystem::read_file_range).
    pub(super) async fn range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> io::Result<Vec<u8>> {
        if !self.client.ranges {
            return capfs::defaults::range_by_streaming(self, path, offset, length).await;
        }
        let mut data = Vec::new();
        let mut at = offset;
        let end = offset.saturating_add(length);
        while at < end {
            let want = (end - at).min(RANGE_REQUEST_BYTES);
            let part = self.range_request(path, at, want).await?;
            let got = part.len() as u64;
            data.extend_from_slice(&part);
            if got < want {
                break;
            }
            at += got;
        }
        Ok(data)
    }

    /// True when whole-file reads try one range first: the server offers ranges and data
    /// frames, and its replies may be as long as a range of [`SMALL_READ_BYTES`] and one more
    /// byte (its base64 and a reply's envelope, with room for any id the client sends).
    pub(super) fn small_reads(&self) -> bool {
        let client = &self.client;
        let reply = (SMALL_READ_BYTES + 1).div_ceil(3) * 4 + 1024;
        client.ranges && client.data_frames && reply <= client.server_max_message_bytes
    }

    /// The whole file at `path` when it holds at most [`SMALL_READ_BYTES`] (and no more than
    /// the server's read limit), read by one `capfs/readFileRange`; `None` when it holds more,
    /// for the caller to stream it. The caller checks [`small_reads`](Self::small_reads) first.
    pub(super) async fn read_small(&self, path: &AbsolutePathBuf) -> io::Result<Option<Vec<u8>>> {
        let data = self.range_request(path, 0, SMALL_READ_BYTES + 1).await?;
        let len = data.len() as u64;
        let within_limit = self.client.read_limit.is_none_or(|max| len <= max);
        Ok((len <= SMALL_READ_BYTES && within_limit).then_some(data))
    }

    /// One `capfs/readFileRange` of at most `want` bytes at `at`: a server that sends more is
    /// refused.
    async fn range_request(
        &self,
        path: &AbsolutePathBuf,
        at: u64,
        want: u64,
    ) -> io::Result<Vec<u8>> {
        let params = ReadRangeParams {
            path: path.clone().into(),
            offset: at,
            length: want,
            sandbox: None,
        };
        let response: ReadFileResponse = self
            .client
            .call(CAPFS_READ_FILE_RANGE_METHOD, params)
            .await?;
        let part = STANDARD
            .decode(response.data_base64.as_bytes())
            .map_err(|e| crate::error::invalid_base64(path, e))?;
        let got = part.len() as u64;
        if got > want {
            return Err(crate::error::range_overrun(path, got, want));
        }
        Ok(part)
    }
}
