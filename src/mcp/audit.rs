//! The audit log of a local `capfs mcp`: every file system call a tool makes, one line each,
//! in the format and with the method names `capfs serve` writes (a server backend writes its
//! own lines for the same calls).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, ReadDirectoryEntry, RemoveOptions, RenameOptions, Walk, WalkOptions,
};
use capfs_wire::protocol::{
    CAPFS_READ_FILE_RANGE_METHOD, CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WALK_METHOD, FS_COPY_METHOD,
    FS_CREATE_DIRECTORY_METHOD, FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD,
    FS_READ_FILE_METHOD, FS_REMOVE_METHOD, FS_RENAME_METHOD, FS_WRITE_FILE_METHOD,
};
use capfs_wire::server::{AuditLog, AuditRecord};

/// The peer every line names.
const PEER: &str = "mcp";

/// An [`ExecutorFileSystem`] that writes an audit line for each call it passes on.
pub(crate) struct Audited {
    pub(crate) inner: Arc<dyn ExecutorFileSystem>,
    pub(crate) log: AuditLog,
}

impl Audited {
    fn record<T>(
        &self,
        method: &str,
        paths: &[&AbsolutePathBuf],
        started: Instant,
        result: &FileSystemResult<T>,
        bytes: u64,
    ) {
        let paths: Vec<String> = paths.iter().map(ToString::to_string).collect();
        self.log.record(&AuditRecord::of_call(
            1,
            PEER,
            method,
            &paths,
            result.as_ref().map(|_| ()),
            if result.is_ok() { bytes } else { 0 },
            started.elapsed(),
        ));
    }
}

#[async_trait]
impl ExecutorFileSystem for Audited {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        let started = Instant::now();
        let result = self.inner.read_file(path).await;
        let bytes = result.as_ref().map_or(0, |d| d.len() as u64);
        self.record(FS_READ_FILE_METHOD, &[path], started, &result, bytes);
        result
    }

    fn read_file_limit(&self) -> Option<u64> {
        self.inner.read_file_limit()
    }

    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let started = Instant::now();
        let result = self.inner.read_file_to(path, writer, progress).await;
        let bytes = *result.as_ref().unwrap_or(&0);
        self.record(
            CAPFS_READ_FILE_STREAM_METHOD,
            &[path],
            started,
            &result,
            bytes,
        );
        result
    }

    async fn read_file_range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> FileSystemResult<Vec<u8>> {
        let started = Instant::now();
        let result = self.inner.read_file_range(path, offset, length).await;
        let bytes = result.as_ref().map_or(0, |d| d.len() as u64);
        self.record(
            CAPFS_READ_FILE_RANGE_METHOD,
            &[path],
            started,
            &result,
            bytes,
        );
        result
    }

    async fn open_for_transfer(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Option<std::fs::File>> {
        let started = Instant::now();
        let result = self.inner.open_for_transfer(path).await;
        self.record(CAPFS_READ_FILE_STREAM_METHOD, &[path], started, &result, 0);
        result
    }

    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        let started = Instant::now();
        let bytes = contents.len() as u64;
        let result = self.inner.write_file(path, contents).await;
        self.record(FS_WRITE_FILE_METHOD, &[path], started, &result, bytes);
        result
    }

    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        let started = Instant::now();
        let result = self.inner.create_directory(path, options).await;
        self.record(FS_CREATE_DIRECTORY_METHOD, &[path], started, &result, 0);
        result
    }

    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        let started = Instant::now();
        let result = self.inner.get_metadata(path).await;
        self.record(FS_GET_METADATA_METHOD, &[path], started, &result, 0);
        result
    }

    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        let started = Instant::now();
        let result = self.inner.read_directory(path).await;
        self.record(FS_READ_DIRECTORY_METHOD, &[path], started, &result, 0);
        result
    }

    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        let started = Instant::now();
        let result = self.inner.remove(path, options).await;
        self.record(FS_REMOVE_METHOD, &[path], started, &result, 0);
        result
    }

    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        let started = Instant::now();
        let result = self.inner.copy(source, destination, options).await;
        self.record(FS_COPY_METHOD, &[source, destination], started, &result, 0);
        result
    }

    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        let started = Instant::now();
        let result = self.inner.rename(source, destination, options).await;
        self.record(
            FS_RENAME_METHOD,
            &[source, destination],
            started,
            &result,
            0,
        );
        result
    }

    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        let started = Instant::now();
        let result = self.inner.walk(path, options).await;
        let count = result.as_ref().map_or(0, |w| w.entries.len() as u64);
        self.record(CAPFS_WALK_METHOD, &[path], started, &result, count);
        result
    }
}
