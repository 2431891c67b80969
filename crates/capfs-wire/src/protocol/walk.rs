//! Wire types of `capfs/walk`: its params and its result.

use serde::{Deserialize, Serialize};

use super::codex::SandboxContext;
use super::file_params::{is_false, is_zero};
use super::wire_path::WirePath;
use capfs::AbsolutePathBuf;
use capfs::{Walk, WalkEntry, WalkError, WalkOptions};

/// Params of [`CAPFS_WALK_METHOD`](super::CAPFS_WALK_METHOD); absent members take [`WalkOptions`]' defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WalkParams {
    /// The absolute path of the directory to walk.
    pub path: WirePath,
    /// See [`WalkOptions::max_depth`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u64>,
    /// See [`WalkOptions::max_entries`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
    /// See [`WalkOptions::pattern`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// See [`WalkOptions::exclude`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_patterns: Vec<String>,
    /// See [`WalkOptions::sizes`].
    #[serde(default)]
    pub sizes: bool,
    /// See [`WalkOptions::metadata`]. Absent when false; a server that does not know it
    /// leaves `mode` and `modifiedAtMs` out of the entries.
    #[serde(default, skip_serializing_if = "is_false")]
    pub metadata: bool,
    /// See [`WalkOptions::link_targets`]. Absent when false; a server that does not know it
    /// leaves `linkTarget` out of the entries.
    #[serde(default, skip_serializing_if = "is_false")]
    pub link_targets: bool,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

impl WalkParams {
    /// The params asking for a walk of `path` with `options`.
    pub fn new(path: AbsolutePathBuf, options: &WalkOptions) -> Self {
        Self {
            path: path.into(),
            sandbox: None,
            max_depth: Some(options.max_depth as u64),
            max_entries: Some(options.max_entries as u64),
            pattern: options.pattern.clone(),
            exclude_patterns: options.exclude.clone(),
            sizes: options.sizes,
            metadata: options.metadata,
            link_targets: options.link_targets,
        }
    }

    /// The options these params ask for, each bound clamped to `usize` (the walk clamps them
    /// further, to [`WALK_DEPTH_LIMIT`](capfs::WALK_DEPTH_LIMIT) and
    /// [`WALK_ENTRY_LIMIT`](capfs::WALK_ENTRY_LIMIT)).
    pub fn options(&self) -> WalkOptions {
        let defaults = WalkOptions::default();
        let clamp = |n: Option<u64>, default: usize| {
            n.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        WalkOptions::default()
            .with_max_depth(clamp(self.max_depth, defaults.max_depth))
            .with_max_entries(clamp(self.max_entries, defaults.max_entries))
            .with_pattern(self.pattern.clone())
            .with_exclude(self.exclude_patterns.clone())
            .with_sizes(self.sizes)
            .with_metadata(self.metadata)
            .with_link_targets(self.link_targets)
    }
}

/// One entry of [`WalkResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WalkEntryWire {
    /// See [`WalkEntry::path`].
    pub path: String,
    /// See [`WalkEntry::is_directory`].
    #[serde(default)]
    pub is_directory: bool,
    /// See [`WalkEntry::is_file`].
    #[serde(default)]
    pub is_file: bool,
    /// See [`WalkEntry::is_symlink`].
    #[serde(default)]
    pub is_symlink: bool,
    /// See [`WalkEntry::size`].
    #[serde(default)]
    pub size: u64,
    /// See [`WalkEntry::mode`]. Absent when unknown or not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// See [`WalkEntry::modified_at_ms`]. Absent when unknown or not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at_ms: Option<i64>,
    /// See [`WalkEntry::link_target`]. Absent when not asked for, unreadable, or not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

impl From<WalkEntry> for WalkEntryWire {
    fn from(e: WalkEntry) -> Self {
        Self {
            path: e.path,
            is_directory: e.is_directory,
            is_file: e.is_file,
            is_symlink: e.is_symlink,
            size: e.size,
            mode: e.mode,
            modified_at_ms: e.modified_at_ms,
            link_target: e
                .link_target
                .and_then(|t| t.into_os_string().into_string().ok()),
        }
    }
}

impl From<WalkEntryWire> for WalkEntry {
    fn from(e: WalkEntryWire) -> Self {
        let mut entry = WalkEntry::new(e.path);
        entry.is_directory = e.is_directory;
        entry.is_file = e.is_file;
        entry.is_symlink = e.is_symlink;
        entry.size = e.size;
        entry.mode = e.mode;
        entry.modified_at_ms = e.modified_at_ms;
        entry.link_target = e.link_target.map(Into::into);
        entry
    }
}

/// Result of [`CAPFS_WALK_METHOD`](super::CAPFS_WALK_METHOD).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WalkResponse {
    /// The entries, in depth-first pre-order.
    pub entries: Vec<WalkEntryWire>,
    /// See [`Walk::truncated`].
    #[serde(default)]
    pub truncated: bool,
    /// See [`Walk::stopped`]: present when `truncated` is true and the request asked for
    /// `metadata` or `linkTargets`. Absent from a truncated walk (a server too old to send it,
    /// or a request that asked for neither), the walk is taken to have stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<bool>,
    /// A capfs addition: see [`Walk::errors`]. Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<WalkErrorWire>,
    /// See [`Walk::non_utf8_names_omitted`]. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_utf8_names_omitted: u64,
}

/// One entry of [`WalkResponse::errors`]: a directory the walk could not list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WalkErrorWire {
    /// See [`WalkError::path`].
    pub path: String,
    /// See [`WalkError::message`].
    pub message: String,
}

impl From<Walk> for WalkResponse {
    /// The reply to `w`; entries with names that are not UTF-8 (kept by a walk that asked for
    /// exact names) are left out and counted, as their text names another entry or none.
    fn from(w: Walk) -> Self {
        let (raw, exact): (Vec<WalkEntry>, Vec<WalkEntry>) =
            w.entries.into_iter().partition(|e| e.raw_path.is_some());
        let entries = exact.into_iter().map(Into::into).collect();
        let errors = w
            .errors
            .into_iter()
            .map(|e| WalkErrorWire {
                path: e.path,
                message: e.message,
            })
            .collect();
        Self {
            entries,
            truncated: w.truncated,
            stopped: w.truncated.then_some(w.stopped),
            errors,
            non_utf8_names_omitted: w.non_utf8_names_omitted + raw.len() as u64,
        }
    }
}

impl From<WalkResponse> for Walk {
    fn from(w: WalkResponse) -> Self {
        let entries = w.entries.into_iter().map(Into::into).collect();
        let errors = w
            .errors
            .into_iter()
            .map(|e| WalkError {
                path: e.path,
                message: e.message,
            })
            .collect();
        let mut walk = Walk::default();
        walk.entries = entries;
        walk.truncated = w.truncated;
        walk.stopped = w.truncated && w.stopped.unwrap_or(true);
        walk.errors = errors;
        walk.non_utf8_names_omitted = w.non_utf8_names_omitted;
        walk
    }
}
