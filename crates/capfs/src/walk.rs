//! The walk's options and result ([`WalkOptions`], [`Walk`]) and its glob filter. The default
//! walk every backend gets (one `read_directory` per directory) is built on them in
//! `file_system/defaults.rs`.

use crate::error;

/// The deepest [`WalkOptions::max_depth`] a walk honours; deeper requests are clamped to it.
pub const WALK_DEPTH_LIMIT: usize = 256;

/// The most entries a walk returns, whatever [`WalkOptions::max_entries`] asks for.
pub const WALK_ENTRY_LIMIT: usize = 1_000_000;

/// The most bytes the paths of a walk's entries hold together (64 MiB): a walk of long names
/// stops there, truncated, so that what it returns stays bounded in memory.
pub const WALK_BYTES_LIMIT: usize = 64 << 20;

/// Options of [`ExecutorFileSystem::walk`](crate::ExecutorFileSystem::walk).
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            max_depth: 64,
            max_entries: 100_000,
            pattern: None,
            exclude: Vec::new(),
            sizes: false,
        }
    }
}

impl WalkOptions {
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
pub struct Walk {
    /// The entries found.
    pub entries: Vec<WalkEntry>,
    /// A bound cut the walk: it stopped at [`WalkOptions::max_entries`] or
    /// [`WALK_BYTES_LIMIT`], left directories at [`WalkOptions::max_depth`] unlisted, or (through
    /// a server) was cut to fit the server's message limit.
    pub truncated: bool,
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

/// The relative path of `name` inside the directory at `prefix` ("" for the start directory).
pub(crate) fn walk_child(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}
