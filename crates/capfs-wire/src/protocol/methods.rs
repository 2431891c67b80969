//! The method names, one constant each, used by the client and the server alike.

/// `initialize`: the first request on a connection.
pub const INITIALIZE_METHOD: &str = "initialize";
/// `initialized`: the notification that completes the handshake.
pub const INITIALIZED_METHOD: &str = "initialized";
/// `fs/readFile`.
pub const FS_READ_FILE_METHOD: &str = "fs/readFile";
/// `fs/writeFile`.
pub const FS_WRITE_FILE_METHOD: &str = "fs/writeFile";
/// `fs/createDirectory`.
pub const FS_CREATE_DIRECTORY_METHOD: &str = "fs/createDirectory";
/// `fs/getMetadata`.
pub const FS_GET_METADATA_METHOD: &str = "fs/getMetadata";
/// `fs/readDirectory`.
pub const FS_READ_DIRECTORY_METHOD: &str = "fs/readDirectory";
/// `fs/remove`.
pub const FS_REMOVE_METHOD: &str = "fs/remove";
/// `fs/copy`.
pub const FS_COPY_METHOD: &str = "fs/copy";
/// `fs/rename`.
pub const FS_RENAME_METHOD: &str = "fs/rename";

/// `capfs/readFileStream`: a capfs extension; the contents follow as data frames.
pub const CAPFS_READ_FILE_STREAM_METHOD: &str = "capfs/readFileStream";
/// `capfs/writeFileStream`: a capfs extension; the contents follow as data frames.
pub const CAPFS_WRITE_FILE_STREAM_METHOD: &str = "capfs/writeFileStream";
/// `capfs/walk`: a capfs extension; a confined walk of a directory tree in one request.
pub const CAPFS_WALK_METHOD: &str = "capfs/walk";
/// `capfs/readLink`: a capfs extension; the text of a symlink.
pub const CAPFS_READ_LINK_METHOD: &str = "capfs/readLink";
/// `capfs/createSymlink`: a capfs extension; creates a symlink.
pub const CAPFS_CREATE_SYMLINK_METHOD: &str = "capfs/createSymlink";
/// `capfs/narrowRoots`: a capfs extension; narrows the connection's roots to directories
/// inside them, each opened as a root of its own.
pub const CAPFS_NARROW_ROOTS_METHOD: &str = "capfs/narrowRoots";

/// `capfs/readFileRange`: a capfs extension; part of a file, read from an offset.
pub const CAPFS_READ_FILE_RANGE_METHOD: &str = "capfs/readFileRange";
