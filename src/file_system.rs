//! The `ExecutorFileSystem` trait and the option and metadata types it uses.

use async_trait::async_trait;

use std::path::PathBuf;

use crate::AbsolutePathBuf;

/// Every operation returns a plain `std::io::Result`: callers match on `io::ErrorKind`, and both
/// backends give the same kind for the same situation.
pub type FileSystemResult<T> = std::io::Result<T>;

/// Options of [`ExecutorFileSystem::create_directory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateDirectoryOptions {
    /// Create missing parents too, and succeed when the directory already exists.
    pub recursive: bool,
}

impl Default for CreateDirectoryOptions {
    fn default() -> Self {
        Self { recursive: true }
    }
}

/// Options of [`ExecutorFileSystem::remove`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoveOptions {
    /// Remove a directory together with everything inside it.
    pub recursive: bool,
    /// Succeed when the path does not exist.
    pub force: bool,
}

impl Default for RemoveOptions {
    fn default() -> Self {
        Self {
            recursive: true,
            force: true,
        }
    }
}

/// Options of [`ExecutorFileSystem::copy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyOptions {
    /// Required to copy a directory (and everything inside it).
    pub recursive: bool,
}

/// Options of [`ExecutorFileSystem::rename`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameOptions {
    /// Replace an existing destination; when false, an existing destination is `AlreadyExists`.
    pub overwrite: bool,
}

/// How a written file ends up on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Permission bits to give the file (at most 0o777: setuid, setgid and sticky are never
    /// applied). None: an existing file keeps its bits, a new one gets the default.
    pub mode: Option<u32>,
    /// Modification time in ms since the Unix epoch. None: the time of the write.
    pub modified_at_ms: Option<i64>,
}

/// What [`ExecutorFileSystem::get_metadata`] reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileMetadata {
    /// The path (after following symlinks inside the root) is a directory.
    pub is_directory: bool,
    /// The path (after following symlinks inside the root) is a regular file.
    pub is_file: bool,
    /// The path itself is a symlink.
    pub is_symlink: bool,
    /// Size in bytes of the resolved file.
    pub size: u64,
    /// Creation time in milliseconds since the Unix epoch, 0 when unknown.
    pub created_at_ms: i64,
    /// Modification time in milliseconds since the Unix epoch, 0 when unknown.
    pub modified_at_ms: i64,
    /// Permission bits of the resolved file (`0o7777` at most), 0 when unknown.
    pub mode: u32,
}

/// One entry of [`ExecutorFileSystem::read_directory`]; types are those of the entry itself
/// (symlinks are not followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadDirectoryEntry {
    /// The entry's name (non-UTF-8 bytes replaced by U+FFFD: see `lossy_name`).
    pub file_name: String,
    /// The entry is a directory.
    pub is_directory: bool,
    /// The entry is a regular file.
    pub is_file: bool,
    /// The entry is a symlink.
    pub is_symlink: bool,
    /// The name on disk is not valid UTF-8, so `file_name` is a lossy rendering that names
    /// another entry or none: joined to its directory it does not reach this entry. The server
    /// leaves such entries out of remote listings (and says how many it left out).
    pub lossy_name: bool,
}

/// A file system an agent's tools use, confined to sandbox roots.
///
/// Every path is an [`AbsolutePathBuf`]; a path under no sandbox root, or one that leads out of its
/// root through `..` or a symlink, fails with `PermissionDenied` and touches nothing.
#[async_trait]
pub trait ExecutorFileSystem: Send + Sync {
    /// Reads a whole regular file.
    ///
    /// # Errors
    ///
    /// `NotFound`; `IsADirectory`; `InvalidInput` for a special file or a file over the read limit
    /// (`file is too large to read: limit is {N} bytes`); `PermissionDenied` for an escape.
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>>;

    /// Replaces the file's contents atomically (temporary file in the same directory, then rename).
    ///
    /// # Errors
    ///
    /// `NotFound` when the parent is missing; `IsADirectory`; `PermissionDenied` for an escape or a
    /// read-only root.
    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()>;

    /// Creates a directory (and its parents when `recursive`).
    ///
    /// # Errors
    ///
    /// `AlreadyExists` (non-recursive on an existing path); `NotFound` (missing parent).
    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()>;

    /// Reports the type, size and times of a path, following symlinks inside the root.
    ///
    /// # Errors
    ///
    /// `NotFound`; `PermissionDenied` for an escape.
    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata>;

    /// Lists a directory, one entry per name, in readdir order.
    ///
    /// # Errors
    ///
    /// `NotFound`; `NotADirectory`.
    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>>;

    /// Removes a file, a symlink (the link itself) or a directory (`recursive` for a non-empty one).
    ///
    /// # Errors
    ///
    /// `DirectoryNotEmpty`; `NotFound` unless `force`; `PermissionDenied` for a root.
    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()>;

    /// Copies a file, a symlink (as a link) or, with `recursive`, a directory tree.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a directory without `recursive`, a copy into itself or a descendant, a
    /// special file, or a file onto itself.
    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()>;

    /// Renames atomically within one root.
    ///
    /// # Errors
    ///
    /// `AlreadyExists` when `overwrite` is false and the destination exists; `CrossesDevices`
    /// between roots; `PermissionDenied` for a root.
    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()>;

    /// Reads the text of the symlink at `path` (the link itself; it is not followed, and its
    /// text may name a place outside the root: it is only text).
    ///
    /// # Errors
    ///
    /// `NotFound`; `InvalidInput` when `path` is not a symlink; `PermissionDenied` for an
    /// escape in the path's parents; `Unsupported` from a file system without links.
    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<PathBuf> {
        Err(crate::error::unsupported(path, "reading symlinks"))
    }

    /// Creates a symlink at `path` whose text is `target`. Following it later stays confined
    /// like any other link: a target outside the root is an escape when used.
    ///
    /// # Errors
    ///
    /// `AlreadyExists`; `NotFound` for a missing parent; `PermissionDenied` for an escape or a
    /// read-only root; `Unsupported` from a file system without links.
    async fn create_symlink(
        &self,
        path: &AbsolutePathBuf,
        target: &std::path::Path,
    ) -> FileSystemResult<()> {
        let _ = target;
        Err(crate::error::unsupported(path, "creating symlinks"))
    }
}
