//! Copying a file's contents into another open file inside the kernel: a reflink (`FICLONE`)
//! where the file system shares extents, else `copy_file_range` over the source's data extents
//! only (found with `SEEK_DATA`/`SEEK_HOLE`), so holes stay holes. Plain reads and writes are
//! the fallback where neither is supported.

use std::io;
use std::os::fd::AsFd;

use rustix::fs::SeekFrom;
use rustix::io::Errno;

/// Bytes asked of one `copy_file_range` call (the kernel may move fewer).
const RANGE_CHUNK: u64 = 1 << 30;
/// Buffer of the read/write fallback.
const FALLBACK_BUFFER: usize = 1 << 20;

/// Copies the first `len` bytes of `src` (its size when opened) into the empty file `dst`,
/// leaving `dst` exactly `len` bytes long. A source that shrinks meanwhile ends the copy early.
///
/// # Errors
///
/// Any read or write error of the two files.
pub(crate) fn copy_contents(src: impl AsFd, dst: impl AsFd, len: u64) -> io::Result<()> {
    let (src, dst) = (src.as_fd(), dst.as_fd());
    if len == 0 || rustix::fs::ioctl_ficlone(dst, src).is_ok() {
        return Ok(());
    }
    rustix::fs::ftruncate(dst, len)?;
    let mut pos = 0;
    while pos < len {
        let start = match rustix::fs::seek(src, SeekFrom::Data(pos)) {
            Ok(start) => start,
            // No data past `pos`: the rest is a hole, already there after the truncate.
            Err(Errno::NXIO) => return Ok(()),
            // No hole support: everything left is data.
            Err(_) => return copy_range(src, dst, pos, len),
        };
        let end = rustix::fs::seek(src, SeekFrom::Hole(start)).map_or(len, |end| end.min(len));
        copy_range(src, dst, start, end)?;
        pos = end;
    }
    Ok(())
}

/// Copies bytes `start..end` of `src` to the same offsets of `dst`.
fn copy_range(
    src: std::os::fd::BorrowedFd<'_>,
    dst: std::os::fd::BorrowedFd<'_>,
    start: u64,
    end: u64,
) -> io::Result<()> {
    let (mut off_in, mut off_out) = (start, start);
    while off_in < end {
        let want = (end - off_in).min(RANGE_CHUNK) as usize;
        match rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            // The source shrank: the copy ends where its data did.
            Ok(0) => return Ok(rustix::fs::ftruncate(dst, off_out)?),
            Ok(_) => {}
            Err(Errno::INTR) => {}
            // Not between these two files (old kernels across file systems, special file
            // systems): plain reads and writes.
            Err(Errno::XDEV | Errno::NOSYS | Errno::OPNOTSUPP | Errno::INVAL) => {
                return read_write_range(src, dst, off_in, end);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The fallback of [`copy_range`]: `pread` and `pwrite` through one buffer.
fn read_write_range(
    src: std::os::fd::BorrowedFd<'_>,
    dst: std::os::fd::BorrowedFd<'_>,
    mut pos: u64,
    end: u64,
) -> io::Result<()> {
    let mut buffer = vec![0u8; FALLBACK_BUFFER];
    while pos < end {
        let want = ((end - pos) as usize).min(buffer.len());
        let read = match rustix::io::pread(src, &mut buffer[..want], pos) {
            Ok(0) => return Ok(rustix::fs::ftruncate(dst, pos)?),
            Ok(read) => read,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut done = 0;
        while done < read {
            match rustix::io::pwrite(dst, &buffer[done..read], pos + done as u64) {
                Ok(written) => done += written,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        pos += read as u64;
    }
    Ok(())
}
