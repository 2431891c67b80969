//! Arbitrary sequences of WebSocket frames, JSON text and data frames in any order, sent to one
//! server connection over an in-memory duplex: the same code a socket goes through (the read
//! loop, in-flight and work bounds, `stream.rs`, the reply writer), via `serve_byte_stream`,
//! over a local backend confined to a temporary root.
//!
//! Input: the first byte chooses how far the handshake goes (none, `initialize`, both steps);
//! then operations of the form `op, len, payload[len]`:
//! - `op % 6 == 0`: a text frame carrying the payload (`$ROOT` stands for the root's path);
//! - `1`: the same as a binary frame (JSON in a binary frame is accepted);
//! - `2`: a data frame: payload byte 0 picks the stream id (0..8), byte 1 the tag (`0x00`,
//!   `0x01`, or any other byte), the rest is the frame's payload;
//! - `3`: a `capfs/writeFileStream` of stream `payload[0] % 8` to one of four files, sized
//!   `payload[2]` when `payload[1]` is even, unsized otherwise;
//! - `4`: a `capfs/readFileStream` of stream `payload[0] % 8` of one of the seeded paths, with
//!   `maxBytes` `payload[2]` when `payload[1]` is even;
//! - `5`: an ordinary fs call (method from `payload[0]`) on a seeded path.
//!
//! Oracle: nothing panics; the connection answers and closes within a bound (a stalled read
//! loop, a deadlock between requests and data frames, a stream that never times out are
//! findings); every text frame the server sends decodes as a message; every binary frame is a
//! data frame of a stream some `capfs/readFileStream` named; nothing outside the root changes.

#![no_main]

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
use capfs_wire::protocol::{DATA_FRAME_HEADER_LEN, Message, data_frame_header, data_frame_stream};
use capfs_wire::server::{ServerConfig, serve_byte_stream};
use futures_util::{SinkExt, StreamExt};
use libfuzzer_sys::fuzz_target;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::Role;

/// Longest a whole input may take: every stream times out long before.
const BOUND: Duration = Duration::from_secs(20);
const SEEDED: [&str; 6] = ["a.txt", "big", "d", "d/e", "missing", "link-out"];

struct Fixture {
    _dir: tempfile::TempDir,
    root: String,
    outside: std::path::PathBuf,
    fs: Arc<dyn ExecutorFileSystem>,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root_dir = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root_dir.join("d/e")).expect("seed dir");
        std::fs::create_dir(&outside).expect("outside dir");
        std::fs::write(outside.join("secret"), b"CANARY").expect("canary");
        std::fs::write(root_dir.join("a.txt"), b"hello").expect("seed file");
        std::fs::write(root_dir.join("big"), vec![5u8; 600 * 1024]).expect("seed big file");
        std::os::unix::fs::symlink(&outside, root_dir.join("link-out")).expect("seed link");
        let sandbox = Sandbox::new()
            .with_root(&root_dir, Access::ReadWrite)
            .expect("root");
        let root = sandbox.roots()[0].path().to_string();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Fixture {
            _dir: dir,
            root,
            outside,
            fs: Arc::new(LocalFileSystem::new(sandbox)),
            runtime,
        }
    })
}

/// The seeded path `payload[i]` picks, under the root.
fn seeded(root: &str, payload: &[u8], i: usize) -> String {
    let name = SEEDED[payload.get(i).copied().unwrap_or(0) as usize % SEEDED.len()];
    format!("{root}/{name}")
}

/// The frames an input stands for, and the stream ids of the streamed reads it asks for.
fn frames(data: &[u8], root: &str) -> (Vec<WsMessage>, HashSet<u64>) {
    let mut out = Vec::new();
    let mut reads = HashSet::new();
    let Some((&stage, mut rest)) = data.split_first() else {
        return (out, reads);
    };
    if stage % 3 >= 1 {
        out.push(WsMessage::text(
            r#"{"id":0,"method":"initialize","params":{"clientName":"fuzz"}}"#,
        ));
    }
    if stage % 3 == 2 {
        out.push(WsMessage::text(r#"{"method":"initialized"}"#));
    }
    let mut next_id = 1u64;
    while let [op, len, tail @ ..] = rest {
        let len = (*len as usize).min(tail.len());
        let (payload, after) = tail.split_at(len);
        rest = after;
        let byte = |i: usize| payload.get(i).copied().unwrap_or(0);
        let id = next_id;
        next_id += 1;
        match op % 6 {
            0 => out.push(WsMessage::text(
                String::from_utf8_lossy(payload).replace("$ROOT", root),
            )),
            1 => out.push(WsMessage::Binary(
                String::from_utf8_lossy(payload)
                    .replace("$ROOT", root)
                    .into_bytes()
                    .into(),
            )),
            2 => {
                let mut frame = data_frame_header(u64::from(byte(0) % 8)).to_vec();
                frame[0] = match byte(1) % 3 {
                    0 => 0x00,
                    1 => 0x01,
                    _ => byte(1),
                };
                frame.extend_from_slice(payload.get(2..).unwrap_or_default());
                out.push(WsMessage::Binary(frame.into()));
            }
            3 => {
                let mut params = serde_json::json!({
                    "path": format!("{root}/w{}", byte(0) % 4),
                    "streamId": byte(0) % 8,
                });
                if byte(1) % 2 == 0 {
                    params["size"] = byte(2).into();
                }
                out.push(request(id, "capfs/writeFileStream", params));
            }
            4 => {
                let stream_id = u64::from(byte(0) % 8);
                reads.insert(stream_id);
                let mut params = serde_json::json!({
                    "path": seeded(root, payload, 3),
                    "streamId": stream_id,
                });
                if byte(1) % 2 == 0 {
                    params["maxBytes"] = (u64::from(byte(2)) * 4096).into();
                }
                out.push(request(id, "capfs/readFileStream", params));
            }
            _ => {
                // Every method the server's table answers, each with the same params.
                let methods: Vec<&str> = capfs_wire::server::method_names().collect();
                let method = methods[byte(0) as usize % methods.len()];
                let params = serde_json::json!({
                    "path": seeded(root, payload, 1),
                    "sourcePath": seeded(root, payload, 1),
                    "destinationPath": format!("{root}/w{}", byte(2) % 4),
                    "dataBase64": "aGVsbG8=",
                    "recursive": byte(3) % 2 == 0,
                });
                out.push(request(id, method, params));
            }
        }
    }
    (out, reads)
}

fn request(id: u64, method: &str, params: serde_json::Value) -> WsMessage {
    let request = serde_json::json!({"id": id, "method": method, "params": params});
    WsMessage::text(request.to_string())
}

fn outside_state(outside: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(outside)
        .expect("outside dir")
        .map(|e| {
            let e = e.expect("entry");
            let contents = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), contents)
        })
        .collect();
    entries.sort();
    entries
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    let (frames, reads) = frames(data, &fixture.root);
    let outside_before = outside_state(&fixture.outside);
    let config = ServerConfig::default()
        .with_max_in_flight(4)
        .with_max_blocking_per_connection(2)
        .with_max_message_bytes(512 * 1024)
        .with_stream_idle_timeout(Duration::from_millis(50));
    fixture.runtime.block_on(async {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let server = serve_byte_stream(
            Arc::clone(&fixture.fs),
            config,
            server_io,
            "fuzz",
            std::future::pending(),
        );
        let client = async move {
            let ws = WebSocketStream::from_raw_socket(client_io, Role::Client, None).await;
            let (mut sink, mut stream) = ws.split();
            let send = async move {
                for frame in frames {
                    if sink.send(frame).await.is_err() {
                        return;
                    }
                }
                let _ = sink.close().await;
            };
            let receive = async move {
                while let Some(Ok(frame)) = stream.next().await {
                    match frame {
                        WsMessage::Text(text) => {
                            if let Err(e) = Message::from_slice(text.as_bytes()) {
                                panic!("the server sent {text}, which does not decode: {e}");
                            }
                        }
                        WsMessage::Binary(bytes) => {
                            let stream_id = data_frame_stream(&bytes).unwrap_or_else(|| {
                                panic!("binary frame {bytes:?} is no data frame")
                            });
                            assert!(bytes.len() >= DATA_FRAME_HEADER_LEN);
                            assert!(
                                reads.contains(&stream_id),
                                "frames of unread stream {stream_id}"
                            );
                        }
                        _ => {}
                    }
                }
            };
            tokio::join!(send, receive);
        };
        let both = async { tokio::join!(server, client) };
        let (served, ()) = tokio::time::timeout(BOUND, both)
            .await
            .expect("the connection answered and closed in time");
        served.expect("serve_byte_stream");
    });
    assert_eq!(
        outside_state(&fixture.outside),
        outside_before,
        "outside changed"
    );
});
