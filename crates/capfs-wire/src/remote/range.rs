//! Ranges of files: `capfs/readFileRange` when the server offers it, else the file streamed and
//! only the range kept.

use std::io;

use crate::encoding::STANDARD;
use base64::Engine;

use super::handle::RemoteFileSystem;
use crate::protocol::{CAPFS_READ_FILE_RANGE_METHOD, ReadFileResponse, ReadRangeParams};
use capfs::AbsolutePathBuf;

/// The most bytes asked for in one `capfs/readFileRange` request; longer ranges take several.
const RANGE_REQUEST_BYTES: u64 = 4 * 1024 * 1024;

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
            data.extend_from_slice(&part);
            if got < want {
                break;
            }
            at += got;
        }
        Ok(data)
    }
}
