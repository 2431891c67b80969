//! Ranges of files: read with `pread` from the opened file, or, for a backend that cannot seek,
//! picked out of a stream.

use std::io;
use std::os::unix::fs::FileExt;

use super::{INLINE_READ_BYTES, Inner, read};
use crate::path::AbsolutePathBuf;

/// At most `length` bytes of `path` from `offset`, read with `pread` (the file is opened and
/// checked as a streamed read opens it).
pub(super) fn read_range(
    fs: &Inner,
    path: &AbsolutePathBuf,
    offset: u64,
    length: u64,
) -> io::Result<Vec<u8>> {
    let (file, size) = read::open_regular(fs, path)?;
    let want = length.min(size.saturating_sub(offset));
    let mut data = vec![0u8; usize::try_from(want).unwrap_or(usize::MAX)];
    let mut filled = 0;
    while filled < data.len() {
        match file.read_at(&mut data[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(crate::error::with_path(path, e)),
        }
    }
    data.truncate(filled);
    Ok(data)
}

/// True when a range of `length` bytes is small enough to read on the calling task.
pub(super) fn is_small(length: u64) -> bool {
    length <= INLINE_READ_BYTES
}
