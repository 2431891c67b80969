//! Wire types of `capfs/walk`: its params and its result.

use serde::{Deserialize, Serialize};

use super::file_params::is_zero;
use capfs::AbsolutePathBuf;
use capfs::{Walk, WalkEntry, WalkError, WalkOptions};

/// Params of [`CAPFS_WALK_METHOD`](super::CAPFS_WALK_METHOD); absent members take [`WalkOptions`]' defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WalkParams {
    /// The absolute path of the directory to walk.
    pub path: AbsolutePathBuf,
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
}

impl WalkParams {
    /// The params asking for a walk of `path` with `options`.
    pub fn new(path: AbsolutePathBuf, options: &WalkOptions) -> Self {
        Self {
            path,
            max_depth: Some(options.max_depth as u64),
            max_entries: Some(options.max_entries as u64),
            pattern: options.pattern.clone(),
            exclude_patterns: options.exclude.clone(),
            sizes: options.sizes,
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
        WalkOptions {
            max_depth: clamp(self.max_depth, defaults.max_depth),
            max_entries: clamp(self.max_entries, defaults.max_entries),
            pattern: self.pattern.clone(),
            exclude: self.exclude_patterns.clone(),
            sizes: self.sizes,
        }
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
    fn from(w: Walk) -> Self {
        let entries = w
            .entries
            .into_iter()
            .map(|e| WalkEntryWire {
                path: e.path,
                is_directory: e.is_directory,
                is_file: e.is_file,
                is_symlink: e.is_symlink,
                size: e.size,
            })
            .collect();
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
            errors,
            non_utf8_names_omitted: w.non_utf8_names_omitted,
        }
    }
}

impl From<WalkResponse> for Walk {
    fn from(w: WalkResponse) -> Self {
        let entries = w
            .entries
            .into_iter()
            .map(|e| WalkEntry {
                path: e.path,
                is_directory: e.is_directory,
                is_file: e.is_file,
                is_symlink: e.is_symlink,
                size: e.size,
            })
            .collect();
        let errors = w
            .errors
            .into_iter()
            .map(|e| WalkError {
                path: e.path,
                message: e.message,
            })
            .collect();
        Self {
            entries,
            truncated: w.truncated,
            errors,
            non_utf8_names_omitted: w.non_utf8_names_omitted,
        }
    }
}
