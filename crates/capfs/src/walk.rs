//! The walk's options and result ([`WalkOptions`], [`Walk`]) and its glob filter. The default
//! walk every backend gets (one `read_directory` per directory) is built on them in
//! `file_system.rs`.

use std::path::PathBuf;

use crate::error;

/// The deepest [`WalkOptions::max_depth`] a walk honours; deeper requests are clamped to it.
pub const WALK_DEPTH_LIMIT: usize = 256;

/// The most entries a walk returns, whatever [`WalkOptions::max_entries`] asks for.
pub const WALK_ENTRY_LIMIT: usize = 1_000_000;

/// The most bytes the paths of a walk's entries hold together (64 MiB): a walk of long names
/// stops there, truncated, so that what it returns stays bounded in memory.
pub const WALK_BYTES_LIMIT: usize = 64 << 20;

/// Options of [`ExecutorFileSystem::walk`](crate::ExecutorFileSystem::walk), built from
/// [`WalkOptions::default`] and its `with_` methods.
///
/// What costs a call per entry is asked for: a walk of a large tree for a search pays no
/// `stat` per file unless it wants sizes or metadata, and no `readlink` per link unless it
/// wants link text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalkOptions {
    /// Levels of directories listed: 1 lists only the start directory's own entries. At most
    /// [`WALK_DEPTH_LIMIT`].
    pub max_depth: usize,
    /// Most entries returned; the walk stops at this many and reports itself truncated. At most
    /// [`WALK_ENTRY_LIMIT`].
    pub max_entries: usize,
    /// A glob (`*`, `?`, `[...]`, `{a,b}`, `**`) matched against each entry's path relative to
    /// the start directory; only matching entries are returned, but every directory is walked.
    /// None: every entry is returned.
    pub pattern: Option<String>,
    /// Globs matched like `pattern`; a matching entry is neither returned nor descended into.
    pub exclude: Vec<String>,
    /// Report each regular file's size (one `stat` per file); otherwise sizes are 0.
    pub sizes: bool,
    /// Report the permission bits and modification time of each entry that is not a symlink
    /// ([`WalkEntry::mode`], [`WalkEntry::modified_at_ms`]; one `stat` per entry).
    pub metadata: bool,
    /// Report each symlink's text ([`WalkEntry::link_target`]; one `readlink` per link).
    pub link_targets: bool,
    /// Keep entries whose names are not UTF-8 instead of leaving them out: their exact path is
    /// [`WalkEntry::raw_path`], and `path` its lossy text, for display only. Never over a
    /// server, whose walks carry text alone.
    pub raw_names: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            max_depth: 64,
            max_entries: 100_000,
            pattern: None,
            exclude: Vec::new(),
            sizes: false,
            metadata: false,
            link_targets: false,
            raw_names: false,
        }
    }
}

impl WalkOptions {
    /// These options with [`max_depth`](Self::max_depth) set.
    pub fn with_max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// These options with [`max_entries`](Self::max_entries) set.
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries;
        self
    }

    /// These options with [`pattern`](Self::pattern) set.
    pub fn with_pattern(mut self, pattern: Option<String>) -> Self {
        self.pattern = pattern;
        self
    }

    /// These options with [`exclude`](Self::exclude) set.
    pub fn with_exclude(mut self, exclude: Vec<String>) -> Self {
        self.exclude = exclude;
        self
    }

    /// These options with [`sizes`](Self::sizes) set.
    pub fn with_sizes(mut self, sizes: bool) -> Self {
        self.sizes = sizes;
        self
    }

    /// These options with [`metadata`](Self::metadata) set.
    pub fn with_metadata(mut self, metadata: bool) -> Self {
        self.metadata = metadata;
        self
    }

    /// These options with [`link_targets`](Self::link_targets) set.
    pub fn with_link_targets(mut self, link_targets: bool) -> Self {
        self.link_targets = link_targets;
        self
    }

    /// These options with [`raw_names`](Self::raw_names) set.
    pub fn with_raw_names(mut self, raw_names: bool) -> Self {
        self.raw_names = raw_names;
        self
    }

    /// `max_depth` and `max_entries` within the limits every walk applies.
    pub(crate) fn bounds(&self) -> (usize, usize) {
        (
            self.max_depth.min(WALK_DEPTH_LIMIT),
            self.max_entries.min(WALK_ENTRY_LIMIT),
        )
    }
}

/// One entry of a [`Walk`]; types are those of the entry itself (symlinks are never followed,
/// special files are listed, never opened).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalkEntry {
    /// The path relative to the start directory, names joined by `/`. Entries whose names are
    /// not UTF-8 are left out of walks, with everything below them, and counted
    /// ([`Walk::non_utf8_names_omitted`]).
    pub path: String,
    /// The entry is a directory.
    pub is_directory: bool,
    /// The entry is a regular file.
    pub is_file: bool,
    /// The entry is a symlink.
    pub is_symlink: bool,
    /// Size in bytes of a regular file when [`WalkOptions::sizes`] is set, else 0.
    pub size: u64,
    /// Permission bits (`0o7777` at most) of the entry itself when [`WalkOptions::metadata`]
    /// is set and it is not a symlink (a link's own bits mean nothing); else None.
    pub mode: Option<u32>,
    /// Modification time in milliseconds since the Unix epoch, as [`mode`](Self::mode).
    pub modified_at_ms: Option<i64>,
    /// A symlink's text as stored, never followed, when [`WalkOptions::link_targets`] is set;
    /// else None. Over a server, None also for a text that is not UTF-8.
    pub link_target: Option<PathBuf>,
    /// The exact relative path when a name in it is not UTF-8 (kept only with
    /// [`WalkOptions::raw_names`]); `path` then holds its lossy text, which may name another
    /// entry or none. None for every other entry.
    pub raw_path: Option<PathBuf>,
}

impl WalkEntry {
    /// An entry at `path` of no type, without size or metadata; its fields are set after.
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            ..Self::default()
        }
    }
}

/// A directory a walk found and could not list: it is left out, with everything below it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkError {
    /// The directory's path relative to the start directory, as in [`WalkEntry::path`].
    pub path: String,
    /// Why it could not be listed (`Too many open files (os error 24)`, ...).
    pub message: String,
}

/// What [`ExecutorFileSystem::walk`](crate::ExecutorFileSystem::walk) returns: entries in
/// depth-first pre-order (a directory before its contents, each directory's entries in readdir
/// order). The walk is complete only when [`is_complete`](Self::is_complete): not truncated and
/// without errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Walk {
    /// The entries found.
    pub entries: Vec<WalkEntry>,
    /// A bound cut the walk: it stopped at [`WalkOptions::max_entries`] or
    /// [`WALK_BYTES_LIMIT`], left directories at [`WalkOptions::max_depth`] unlisted, or (through
    /// a server) was cut to fit the server's message limit.
    pub truncated: bool,
    /// The walk ended before its end: at [`WalkOptions::max_entries`], at [`WALK_BYTES_LIMIT`]
    /// or (through a server) at the server's message limit, so that whatever follows its last
    /// entry is missing. False when only [`WalkOptions::max_depth`] cut it: then everything
    /// is listed but the directories at that depth, which a walk from each of them continues.
    /// Through a server, a truncated walk is taken to have stopped unless the server says
    /// otherwise, which it does to a request for metadata or link text (an older server never).
    pub stopped: bool,
    /// Directories found and not listed (gone since they were found, unreadable, or out of
    /// descriptors), in the order met.
    pub errors: Vec<WalkError>,
    /// Entries left out because their names are not UTF-8 (their text form would name another
    /// entry or none), not counting what is below them.
    pub non_utf8_names_omitted: u64,
}

impl Walk {
    /// True when the walk listed everything it was asked for: not truncated, no errors. Names
    /// that are not UTF-8 are left out of complete walks too (see `non_utf8_names_omitted`).
    pub fn is_complete(&self) -> bool {
        !self.truncated && self.errors.is_empty()
    }

    /// Adds `entry` unless a bound says stop: false (and the walk truncated) when it already
    /// holds `max_entries`, or the paths would pass [`WALK_BYTES_LIMIT`].
    pub(crate) fn push(&mut self, entry: WalkEntry, max_entries: usize, bytes: &mut usize) -> bool {
        *bytes += entry.path.len();
        if self.entries.len() >= max_entries || *bytes > WALK_BYTES_LIMIT {
            self.truncated = true;
            self.stopped = true;
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// Records that the directory at `path` could not be listed.
    pub(crate) fn failed(&mut self, path: &str, error: &std::io::Error) {
        self.errors.push(WalkError {
            path: path.to_string(),
            message: error.to_string(),
        });
    }
}

/// The compiled globs of a [`WalkOptions`].
pub(crate) struct WalkFilter {
    pattern: Option<globset::GlobMatcher>,
    exclude: globset::GlobSet,
}

fn glob(pattern: &str) -> std::io::Result<globset::Glob> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| error::invalid_glob(pattern, &e))
}

impl WalkFilter {
    /// Compiles the globs of `options`.
    pub(crate) fn new(options: &WalkOptions) -> std::io::Result<Self> {
        let pattern = match &options.pattern {
            Some(p) => Some(glob(p)?.compile_matcher()),
            None => None,
        };
        let mut exclude = globset::GlobSetBuilder::new();
        for p in &options.exclude {
            exclude.add(glob(p)?);
        }
        let exclude = exclude
            .build()
            .map_err(|e| error::invalid_glob(&options.exclude.join(", "), &e))?;
        Ok(Self { pattern, exclude })
    }

    /// True when the entry at `rel` is left out together with everything below it.
    pub(crate) fn excludes(&self, rel: &str) -> bool {
        !self.exclude.is_empty() && self.exclude.is_match(rel)
    }

    /// True when the entry at `rel` is returned.
    pub(crate) fn selects(&self, rel: &str) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.is_match(rel))
    }
}

/// The exact relative path of `name` inside the directory at `prefix`, when it or `raw` (the
/// directory's own exact path, when that is not UTF-8) holds a name that is not UTF-8.
pub(crate) fn raw_child(
    raw: Option<&std::path::Path>,
    prefix: &str,
    name: &std::ffi::OsStr,
) -> Option<PathBuf> {
    match raw {
        Some(raw) => Some(raw.join(name)),
        None if name.to_str().is_none() => Some(std::path::Path::new(prefix).join(name)),
        None => None,
    }
}

/// The relative path of `name` inside the directory at `prefix` ("" for the start directory).
pub(crate) fn walk_child(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}
