//! The trait's default implementations that take more than a line: each is built from the
//! trait's other methods, so any backend gets it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{ExecutorFileSystem, FileSystemResult};
use crate::path::AbsolutePathBuf;
use crate::walk::{Walk, WalkEntry, WalkFilter, WalkOptions, walk_child};

/// The default [`ExecutorFileSystem::walk`]: one `read_directory` per directory listed and one
/// `get_metadata` per file when sizes are asked for.
pub async fn walk_by_listing<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    options: &WalkOptions,
) -> FileSystemResult<Walk> {
    let filter = WalkFilter::new(options)?;
    let (max_depth, max_entries) = options.bounds();
    let mut walk = Walk::default();
    if max_depth == 0 {
        walk.truncated = true;
        return Ok(walk);
    }
    let mut bytes = 0;
    // One level per directory being listed: its path, its relative path, its depth (1 for the
    // start) and the entries not yet visited.
    let first = fs.read_directory(path).await?;
    let mut stack = vec![(path.clone(), String::new(), 1usize, first.into_iter())];
    while let Some((dir, prefix, depth, entries)) = stack.last_mut() {
        let Some(entry) = entries.next() else {
            stack.pop();
            continue;
        };
        if entry.lossy_name {
            walk.non_utf8_names_omitted += 1;
            continue;
        }
        let rel = walk_child(prefix, &entry.file_name);
        if filter.excludes(&rel) {
            continue;
        }
        let child = dir.join(&entry.file_name)?;
        let depth = *depth;
        if filter.selects(&rel) {
            let size = if options.sizes && entry.is_file {
                fs.get_metadata(&child).await.map_or(0, |m| m.size)
            } else {
                0
            };
            let found = WalkEntry {
                path: rel.clone(),
                is_directory: entry.is_directory,
                is_file: entry.is_file,
                is_symlink: entry.is_symlink,
                size,
            };
            if !walk.push(found, max_entries, &mut bytes) {
                break;
            }
        }
        if entry.is_directory && !entry.is_symlink {
            if depth == max_depth {
                walk.truncated = true;
                continue;
            }
            match fs.read_directory(&child).await {
                Ok(list) => stack.push((child, rel, depth + 1, list.into_iter())),
                Err(e) => walk.failed(&rel, &e),
            }
        }
    }
    Ok(walk)
}

/// The default [`ExecutorFileSystem::read_file_range`]: the file streamed, only the range kept.
pub async fn range_by_streaming<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    offset: u64,
    length: u64,
) -> io::Result<Vec<u8>> {
    let mut keep = Keep {
        at: 0,
        offset,
        end: offset.saturating_add(length),
        data: Vec::new(),
    };
    match fs.read_file_to(path, &mut keep, &mut |_| {}).await {
        Err(_) if keep.at >= keep.end => Ok(keep.data),
        Err(e) => Err(e),
        Ok(_) => Ok(keep.data),
    }
}

/// A writer keeping the bytes of one range of what it is given, and refusing more past it.
struct Keep {
    at: u64,
    offset: u64,
    end: u64,
    data: Vec<u8>,
}

impl tokio::io::AsyncWrite for Keep {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let start = this.at;
        let stop = start + buf.len() as u64;
        let from = this.offset.max(start);
        let to = this.end.min(stop);
        if from < to {
            this.data
                .extend_from_slice(&buf[(from - start) as usize..(to - start) as usize]);
        }
        this.at = stop;
        if this.at >= this.end {
            return Poll::Ready(Err(crate::error::range_read()));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
