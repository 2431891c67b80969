//! `RemoteFileSystem`: the trait proxied to a `capfs serve` (or any codex-style exec-server) over
//! one WebSocket connection.
//!
//! Requests are multiplexed by id: any number of calls may be outstanding at once, and each
//! completes when its own response arrives. When the connection drops, every pending call and
//! every later call fails at once with `BrokenPipe`; no call waits for a peer that is gone.
//!
//! The connection runs over TCP ([`RemoteFileSystem::connect`]) or over the stdin and stdout of a
//! command such as `ssh host capfs serve --listen stdio` ([`RemoteFileSystem::connect_command`]):
//! the same WebSocket frames, there without the HTTP upgrade. Either way it is a `transport::link`,
//! as a server's connection is: the client adds the items its writer sends itself (`outgoing.rs`)
//! and what its reader does with each message (`client.rs`).

mod canonical;
mod client;
mod common;
mod connect;
mod handle;
mod narrow;
mod options;
mod outgoing;
mod processes;
mod range;
mod reply;
mod routes;
mod stream;
mod walk;

use crate::encoding::STANDARD;
use async_trait::async_trait;
use base64::Engine;

use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD, CopyParams,
    CreateDirectoryParams, CreateSymlinkParams, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, GetMetadataResponse, PathParams, ReadDirectoryResponse, ReadFileResponse,
    ReadLinkResponse, RemoveParams, RenameParams, RootDescription, WalkParams, WalkResponse,
};
use capfs::defaults::walk_by_listing;
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, ReadDirectoryEntry, RemoveOptions, RenameOptions, Walk, WalkOptions,
    WriteOptions,
};
pub use handle::RemoteFileSystem;
pub use options::RemoteOptions;
pub use processes::RemoteProcesses;
use reply::Empty;
use stream::STREAM_WRITE_THRESHOLD;

#[async_trait]
impl ExecutorFileSystem for RemoteFileSystem {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        if self.small_reads()
            && let Some(data) = self.read_small(path).await?
        {
            return Ok(data);
        }
        if self.client.data_frames {
            let mut data = Vec::new();
            let limit = self.client.read_limit;
            self.stream_read(path, limit, &mut data, &mut |_| {})
                .await?;
            return Ok(data);
        }
        let params = PathParams {
            path: path.clone().into(),
            sandbox: None,
        };
        let response: ReadFileResponse = self.client.call(FS_READ_FILE_METHOD, params).await?;
        STANDARD
            .decode(response.data_base64.as_bytes())
            .map_err(|e| crate::error::invalid_base64(path, e))
    }

    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        if self.client.data_frames && contents.len() >= STREAM_WRITE_THRESHOLD {
            let size = contents.len() as u64;
            let options = WriteOptions::default();
            let reader = &mut contents.as_slice();
            self.stream_write(path, reader, Some(size), options, &mut |_| {})
                .await?;
            return Ok(());
        }
        self.write_inline(path, contents, WriteOptions::default())
            .await
    }

    fn read_file_limit(&self) -> Option<u64> {
        self.client.read_limit
    }

    async fn read_file_range(
        &self,
        path: &AbsolutePathBuf,
        offset: u64,
        length: u64,
    ) -> FileSystemResult<Vec<u8>> {
        self.range(path, offset, length).await
    }

    fn served_roots(&self) -> Vec<RootDescription> {
        self.client.roots.clone()
    }

    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        self.stream_read(path, None, writer, progress).await
    }

    async fn write_file_from(
        &self,
        path: &AbsolutePathBuf,
        reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        self.stream_write(path, reader, size, options, progress)
            .await
    }

    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        let params = CreateDirectoryParams {
            path: path.clone().into(),
            recursive: Some(options.recursive),
            sandbox: None,
        };
        let _: Empty = self.client.call(FS_CREATE_DIRECTORY_METHOD, params).await?;
        Ok(())
    }

    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        let params = PathParams {
            path: path.clone().into(),
            sandbox: None,
        };
        let response: GetMetadataResponse = self
            .client
            .call_with(
                FS_GET_METADATA_METHOD,
                params,
                canonical::canonical_metadata,
            )
            .await?;
        Ok(response.into())
    }

    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        let params = PathParams {
            path: path.clone().into(),
            sandbox: None,
        };
        let response: ReadDirectoryResponse = self
            .client
            .call_with(
                FS_READ_DIRECTORY_METHOD,
                params,
                canonical::canonical_listing,
            )
            .await?;
        if response.non_utf8_names_omitted > 0 {
            tracing::warn!(
                "{path}: {} entries with names that are not UTF-8 were left out of the listing",
                response.non_utf8_names_omitted
            );
        }
        if let Some(bad) = response
            .entries
            .iter()
            .find(|e| !is_plain_name(&e.file_name))
        {
            return Err(invalid_name(path, &bad.file_name));
        }
        if response.truncated {
            // A listing is whole or it is an error: a caller copying or removing a tree must
            // not take the first entries for all of them.
            return Err(crate::error::listing_cut(path, response.entries.len()));
        }
        Ok(response.entries.into_iter().map(Into::into).collect())
    }

    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        let params = RemoveParams {
            path: path.clone().into(),
            recursive: Some(options.recursive),
            force: Some(options.force),
            sandbox: None,
        };
        let _: Empty = self.client.call(FS_REMOVE_METHOD, params).await?;
        Ok(())
    }

    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        let params = CopyParams {
            source_path: source.clone().into(),
            destination_path: destination.clone().into(),
            recursive: Some(options.recursive),
            sandbox: None,
        };
        let _: Empty = self.client.call(FS_COPY_METHOD, params).await?;
        Ok(())
    }

    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        let params = RenameParams {
            source_path: source.clone().into(),
            destination_path: destination.clone().into(),
            overwrite: Some(options.overwrite),
            sandbox: None,
        };
        let _: Empty = self.client.call(FS_RENAME_METHOD, params).await?;
        Ok(())
    }

    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::path::PathBuf> {
        let params = PathParams {
            path: path.clone().into(),
            sandbox: None,
        };
        let response: ReadLinkResponse = self
            .client
            .capfs_call(CAPFS_READ_LINK_METHOD, params, path, "reading symlinks")
            .await?;
        Ok(response.target.into())
    }

    async fn create_symlink(
        &self,
        path: &AbsolutePathBuf,
        target: &std::path::Path,
    ) -> FileSystemResult<()> {
        let target = target
            .to_str()
            .ok_or_else(|| crate::error::link_text_not_utf8(path))?;
        let params = CreateSymlinkParams {
            path: path.clone().into(),
            target: target.to_string(),
            sandbox: None,
        };
        let _: Empty = self
            .client
            .capfs_call(
                CAPFS_CREATE_SYMLINK_METHOD,
                params,
                path,
                "creating symlinks",
            )
            .await?;
        Ok(())
    }

    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        if !self.client.walk {
            return walk_by_listing(self, path, options).await;
        }
        let params = WalkParams::new(path.clone(), options);
        let response: WalkResponse = self.client.call(CAPFS_WALK_METHOD, params).await?;
        if let Some(bad) = response
            .entries
            .iter()
            .find(|e| !e.path.split('/').all(is_plain_name))
        {
            return Err(invalid_name(path, &bad.path));
        }
        let mut walk = response.into();
        walk::complete(self, path, &mut walk, options).await?;
        Ok(walk)
    }
}

/// A name a listing may hold: exactly one component, neither `.` nor `..`, without `/` or NUL.
/// Anything else would name another entry than the one listed, or none (a path cannot hold
/// NUL), so a server that sends it is broken or hostile.
fn is_plain_name(name: &str) -> bool {
    // Bytes, not chars: both are ASCII, and a byte test is what a listing of many names affords.
    !name.is_empty() && name != "." && name != ".." && !name.bytes().any(|b| b == b'/' || b == 0)
}

use crate::error::invalid_name;
