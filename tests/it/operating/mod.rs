//! Operating capfs: the stdio transport and `--remote-command`, the audit log, `GET /readyz`.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};
use capfs::{AbsolutePathBuf, CopyOptions, ExecutorFileSystem, RemoveOptions, RenameOptions};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

mod audit_and_readiness;
mod stdio;

const BIN: &str = env!("CARGO_BIN_EXE_capfs");

fn abs(p: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(p).unwrap()
}

/// The shell command that serves `ws` on its stdin/stdout, quiet on stderr.
fn stdio_command(ws: &Path) -> String {
    format!(
        "RUST_LOG=capfs=warn exec '{BIN}' serve --listen stdio --root '{}'",
        ws.display()
    )
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
