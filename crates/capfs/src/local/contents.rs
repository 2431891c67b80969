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
/// Holes are looked for only when `sparse` (the source has fewer blocks than bytes): a dense
/// file is copied in one range. A reflink is tried first only when `may_clone` (the
/// destination's file system may have them).
///
/// # Errors
///
/// Any read or write error of the two files.
pub(crate) fn copy_contents(
    src: impl AsFd,
    dst: impl AsFd,
    len: u64,
    sparse: bool,
    may_clone: bool,
) -> io::Result<()> {
    let (src, dst) = (src.as_fd(), dst.as_fd());
    if len == 0 || (may_clone && rustix::fs::ioctl_ficlone(dst, src).is_ok()) {
        return Ok(());
    }
    if !sparse {
        return copy_range(src, dst, 0, len);
    }
    rustix::fs::ftruncate(dst, len)?;
    let mut pos = 0;
    while pos < len {
        let start = match rustix::fs::seek(src, SeekFrom::Data(pos)) {
            Ok(start) => start,
            // No data past `pos`: the rest is a hole, already there after the truncate.
            Err(Errno::NXIO) => break,
            // No hole support: everything left is data.
            Err(_) => return copy_range(src, dst, pos, len),
        };
        let end = rustix::fs::seek(src, SeekFrom::Hole(start)).map_or(len, |end| end.min(len));
        copy_range(src, dst, start, end)?;
        pos = end;
    }
    // A source that shrank since it was opened: the copy is as long as it is now.
    let now = rustix::fs::fstat(src)?.st_size as u64;
    if now < len {
        rustix::fs::ftruncate(dst, now)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    fn file_with(data: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(data).unwrap();
        file.rewind().unwrap();
        file
    }

    fn contents(mut file: &std::fs::File) -> Vec<u8> {
        let mut out = Vec::new();
        file.rewind().unwrap();
        std::io::Read::read_to_end(&mut file, &mut out).unwrap();
        out
    }

    #[test]
    fn the_read_write_fallback_copies_a_range_at_its_offsets() {
        let data: Vec<u8> = (0..3 * FALLBACK_BUFFER + 17).map(|i| i as u8).collect();
        let (src, dst) = (file_with(&data), file_with(b""));
        rustix::fs::ftruncate(&dst, data.len() as u64).unwrap();
        read_write_range(src.as_fd(), dst.as_fd(), 5, data.len() as u64).unwrap();
        let mut want = data.clone();
        want[..5].fill(0);
        assert_eq!(contents(&dst), want);
    }

    #[test]
    fn a_source_shorter_than_announced_ends_the_copy_where_its_data_ends() {
        let src = file_with(b"0123456789");
        for sparse in [false, true] {
            let dst = file_with(b"");
            copy_contents(&src, &dst, 4096, sparse, true).unwrap();
            assert_eq!(contents(&dst), b"0123456789", "sparse: {sparse}");
        }
        let dst = file_with(b"");
        rustix::fs::ftruncate(&dst, 4096).unwrap();
        read_write_range(src.as_fd(), dst.as_fd(), 0, 4096).unwrap();
        assert_eq!(contents(&dst), b"0123456789");
    }
}
