//! One listed name as the listings carry it: its exact bytes, and the text `--json` prints.

use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

use capfs::AbsolutePathBuf;

use crate::names::escape;

/// One listed name, as `ls --json` and `stat --json` print it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The sandbox path (escaped as a name is, when it is not UTF-8).
    pub path: String,
    /// The last component (the path itself for `/`), escaped the same way.
    pub name: String,
    /// The exact bytes of `name`, which the text output escapes.
    #[serde(skip)]
    pub raw_name: Vec<u8>,
    /// The exact bytes of `path`.
    #[serde(skip)]
    pub raw_path: Vec<u8>,
    /// `file`, `directory`, `symlink` or `other`: the entry itself, links not followed.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Permission bits (of the link's target for a symlink), 0 when unknown.
    pub mode: u32,
    /// Size in bytes (of the target for a symlink).
    pub size: u64,
    /// Modification time, ms since the Unix epoch (of the target for a symlink), 0 when unknown.
    pub modified_at_ms: i64,
    /// Creation time, ms since the Unix epoch, 0 when unknown.
    pub created_at_ms: i64,
    /// The link's text, for a symlink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// What a symlink points to: `file`, `directory`, `other`, or `missing` when it dangles or
    /// leads outside the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_type: Option<&'static str>,
}

/// The last component's bytes (the whole path for `/`).
fn name_of(path: &AbsolutePathBuf) -> Vec<u8> {
    path.file_name()
        .unwrap_or(path.as_path().as_os_str())
        .as_bytes()
        .to_vec()
}

/// A name as `--json` carries it: itself when it is UTF-8, else escaped as the text output
/// shows it (JSON text cannot hold the bytes, and a lossy rendering would name another entry).
fn json_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => escape(bytes),
    }
}

impl Entry {
    /// An entry of `path` with everything else empty.
    pub(super) fn at(path: &AbsolutePathBuf, kind: &'static str) -> Self {
        let raw_name = name_of(path);
        let raw_path = path.as_path().as_os_str().as_bytes().to_vec();
        Self {
            path: json_text(&raw_path),
            name: json_text(&raw_name),
            raw_name,
            raw_path,
            kind,
            mode: 0,
            size: 0,
            modified_at_ms: 0,
            created_at_ms: 0,
            target: None,
            target_type: None,
        }
    }
}
