//! Faults against the real `capfs serve`: a server killed mid-write, a client gone mid-upload,
//! many clients at once with the server's memory watched, and the connection limit under 500
//! idle connections. Every wait is bounded; nothing sleeps to synchronise.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, RemoveOptions,
    RenameOptions,
};
use capfs_wire::protocol::{DATA_CHUNK_BYTES, data_frame_header};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

mod interrupted;
mod many_clients;

fn abs(p: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(p).unwrap()
}

fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

async fn connect(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .unwrap()
}

/// Version `version` of file `file`: the record `<f{file} v{version:06}>` repeated to a length
/// that differs per version, so a mix of two versions or a torn write never matches any one.
/// Odd files are large enough to travel as data frames, even ones as one JSON message.
fn version_contents(file: usize, version: u64) -> Vec<u8> {
    let base = if file % 2 == 1 { 300_000 } else { 2_000 };
    let len = base + (version as usize % 97) * 131;
    let record = format!("<f{file} v{version:06}>");
    record.bytes().cycle().take(len).collect()
}

/// The version a file holds, if its whole contents are exactly one version's.
fn version_of(file: usize, contents: &[u8]) -> Option<u64> {
    let prefix = format!("<f{file} v");
    let digits = contents.get(prefix.len()..prefix.len() + 6)?;
    let version: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (contents.starts_with(prefix.as_bytes()) && version_contents(file, version) == contents)
        .then_some(version)
}
