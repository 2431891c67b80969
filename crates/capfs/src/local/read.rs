//! `read_file`: open without blocking, check the opened handle, read at most the limit.

use std::io::{self, Read};

use cap_std::fs::{OpenOptions, OpenOptionsExt};
use rustix::fs::OFlags;

use super::{Inner, resolve};
use crate::error::{self, with_path};
use crate::path::AbsolutePathBuf;

/// Options that open anything without blocking (a FIFO with no writer, a terminal) and without
/// making it the controlling terminal; the type is checked on the handle afterwards.
pub(crate) fn nonblocking_read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    options.custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
    options
}

/// Maps the open error of a socket (`ENXIO`) to the special-file error.
pub(crate) fn open_error(path: &AbsolutePathBuf, err: io::Error) -> io::Error {
    if err.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
        error::not_regular_file(path)
    } else {
        with_path(path, err)
    }
}

/// Reads the rest of an opened file (whose size at opening was `size`), refusing more than
/// `limit` bytes.
pub(crate) fn read_opened(
    file: &std::fs::File,
    size: u64,
    path: &AbsolutePathBuf,
    limit: u64,
) -> io::Result<Vec<u8>> {
    // The size is only a hint (it may change, or be huge under a huge limit): reserve at most
    // 1 GiB up front and let the vector grow past that as data actually arrives.
    let mut contents = Vec::with_capacity(size.min(1 << 30) as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut contents)
        .map_err(|e| with_path(path, e))?;
    if contents.len() as u64 > limit {
        return Err(error::too_large(limit));
    }
    Ok(contents)
}

/// Reads the next at most `max` bytes of an opened file; empty at its end.
pub(crate) fn read_batch(
    file: &std::fs::File,
    max: usize,
    path: &AbsolutePathBuf,
) -> io::Result<Vec<u8>> {
    let mut batch = Vec::with_capacity(max);
    read_batch_into(file, &mut batch, max, path)?;
    Ok(batch)
}

/// Appends at most `max` more bytes of `file` to `batch`.
pub(crate) fn read_batch_into(
    file: &std::fs::File,
    batch: &mut Vec<u8>,
    max: usize,
    path: &AbsolutePathBuf,
) -> io::Result<()> {
    file.take(max as u64)
        .read_to_end(batch)
        .map_err(|e| with_path(path, e))?;
    Ok(())
}

/// Opens a regular file for reading and returns it with its size, refusing directories, special
/// files and files over the read limit before anything is allocated for them.
///
/// The handle is returned as a `std::fs::File`: std's reads fill uninitialised buffers directly,
/// where a cap-std `File` has them zeroed first (a second pass over every byte of a large file).
pub(crate) fn open_for_read(
    fs: &Inner,
    path: &AbsolutePathBuf,
) -> io::Result<(std::fs::File, u64)> {
    let (file, size) = open_regular(fs, path)?;
    if size > fs.read_limit {
        return Err(error::too_large(fs.read_limit));
    }
    Ok((file, size))
}

/// Opens a regular file for reading, whatever its size, and returns it with its size,
/// refusing directories and special files.
pub(crate) fn open_regular(fs: &Inner, path: &AbsolutePathBuf) -> io::Result<(std::fs::File, u64)> {
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    // Looked at first without being opened, so a device or FIFO is refused without the side
    // effects of an open; the opened handle is checked again below, for whatever a race put
    // there meanwhile.
    let found =
        resolve::followed_metadata(root, resolved.cap_path()).map_err(|e| with_path(path, e))?;
    if found.is_dir() {
        return Err(error::is_a_directory(path));
    }
    if !found.is_file() {
        return Err(error::not_regular_file(path));
    }
    let options = nonblocking_read_options();
    let file = resolve::follow(root, resolved.cap_path(), true, |p| {
        root.dir().open_with(p, &options)
    })
    .map_err(|e| open_error(path, e))?;
    let metadata = file.metadata().map_err(|e| with_path(path, e))?;
    if metadata.is_dir() {
        return Err(error::is_a_directory(path));
    }
    if !metadata.is_file() {
        return Err(error::not_regular_file(path));
    }
    Ok((file.into_std(), metadata.len()))
}
