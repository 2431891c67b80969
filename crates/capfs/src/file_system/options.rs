//! The option types of the trait's calls and what its listings and metadata report. Each is
//! `#[non_exhaustive]`, so a field can be added without breaking callers: they build one from
//! `new()` (or `default()`) and its `with_<field>` setters, and read its public fields.

/// Options of [`ExecutorFileSystem::create_directory`](crate::ExecutorFileSystem::create_directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreateDirectoryOptions {
    /// Create missing parents too, and succeed when the directory already exists.
    pub recursive: bool,
}

impl CreateDirectoryOptions {
    /// The defaults: `recursive`.
    pub const fn new() -> Self {
        Self { recursive: true }
    }
}

impl Default for CreateDirectoryOptions {
    fn default() -> Self {
        Self::new()
    }
}

with_setters!(const CreateDirectoryOptions { with_recursive => recursive: bool });

/// Options of [`ExecutorFileSystem::remove`](crate::ExecutorFileSystem::remove).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveOptions {
    /// Remove a directory together with everything inside it.
    pub recursive: bool,
    /// Succeed when the path does not exist.
    pub force: bool,
}

impl RemoveOptions {
    /// The defaults: `recursive` and `force`.
    pub const fn new() -> Self {
        Self {
            recursive: true,
            force: true,
        }
    }
}

impl Default for RemoveOptions {
    fn default() -> Self {
        Self::new()
    }
}

with_setters!(const RemoveOptions {
    with_recursive => recursive: bool,
    with_force => force: bool,
});

/// Options of [`ExecutorFileSystem::copy`](crate::ExecutorFileSystem::copy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopyOptions {
    /// Required to copy a directory (and everything inside it).
    pub recursive: bool,
}

impl CopyOptions {
    /// The defaults: not `recursive`.
    pub const fn new() -> Self {
        Self { recursive: false }
    }
}

with_setters!(const CopyOptions { with_recursive => recursive: bool });

/// Options of [`ExecutorFileSystem::rename`](crate::ExecutorFileSystem::rename).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenameOptions {
    /// Replace an existing destination; when false, an existing destination is `AlreadyExists`.
    pub overwrite: bool,
}

impl RenameOptions {
    /// The defaults: no `overwrite`.
    pub const fn new() -> Self {
        Self { overwrite: false }
    }
}

with_setters!(const RenameOptions { with_overwrite => overwrite: bool });

/// How a written file ends up on disk: options of [`ExecutorFileSystem::write_file_from`](crate::ExecutorFileSystem::write_file_from).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Permission bits to give the file (at most 0o777: setuid, setgid and sticky are never
    /// applied). None: an existing file keeps its bits, a new one gets the default.
    pub mode: Option<u32>,
    /// Modification time in ms since the Unix epoch. None: the time of the write.
    pub modified_at_ms: Option<i64>,
}

impl WriteOptions {
    /// The defaults: neither a mode nor a modification time.
    pub const fn new() -> Self {
        Self {
            mode: None,
            modified_at_ms: None,
        }
    }
}

with_setters!(const WriteOptions {
    with_mode => mode: Option<u32>,
    with_modified_at_ms => modified_at_ms: Option<i64>,
});

/// What [`ExecutorFileSystem::get_metadata`](crate::ExecutorFileSystem::get_metadata) reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Last access time in milliseconds since the Unix epoch, 0 when unknown.
    pub accessed_at_ms: i64,
    /// Permission bits of the resolved file (`0o7777` at most), 0 when unknown.
    pub mode: u32,
}

with_setters!(const FileMetadata {
    with_is_directory => is_directory: bool,
    with_is_file => is_file: bool,
    with_is_symlink => is_symlink: bool,
    with_size => size: u64,
    with_created_at_ms => created_at_ms: i64,
    with_modified_at_ms => modified_at_ms: i64,
    with_accessed_at_ms => accessed_at_ms: i64,
    with_mode => mode: u32,
});

/// One entry of [`ExecutorFileSystem::read_directory`](crate::ExecutorFileSystem::read_directory); types are those of the entry itself
/// (symlinks are not followed).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The name's exact bytes when they are not UTF-8 (`lossy_name`), as a local listing
    /// found them; `None` when `file_name` is exact. [`name`](Self::name) gives either.
    pub raw_name: Option<std::ffi::OsString>,
}

impl ReadDirectoryEntry {
    /// An entry named `file_name` (exact, so not `lossy_name`) that is neither a directory, a
    /// regular file nor a symlink until a setter says so: what a backend of its own builds.
    pub fn new(file_name: impl Into<String>) -> Self {
        Self {
            file_name: file_name.into(),
            is_directory: false,
            is_file: false,
            is_symlink: false,
            lossy_name: false,
            raw_name: None,
        }
    }

    /// The exact name: joined to its directory, it reaches this entry (unlike `file_name` when
    /// `lossy_name` is set).
    pub fn name(&self) -> &std::ffi::OsStr {
        self.raw_name
            .as_deref()
            .unwrap_or_else(|| std::ffi::OsStr::new(&self.file_name))
    }
}

with_setters!(const ReadDirectoryEntry {
    with_is_directory => is_directory: bool,
    with_is_file => is_file: bool,
    with_is_symlink => is_symlink: bool,
});
