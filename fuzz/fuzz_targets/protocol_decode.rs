//! Arbitrary bytes as incoming messages to the server's protocol session: the same decoder,
//! handshake rules and handler that `capfs serve` runs for every WebSocket message, here without
//! the socket, over a local backend confined to a temporary root.
//!
//! Input: the first byte chooses how far the handshake has gone (none, `initialize`, both
//! steps); the rest is split at 0xFF bytes (never valid in JSON text) into messages. The text
//! `$ROOT` in a message stands for the sandbox root's path, so seeds can name real files.
//!
//! Oracle: nothing panics; a message that decodes re-encodes to text that decodes to the same
//! message; every reply round-trips the same way, answers a request with its own id, and
//! answers undecodable input with -32600 and the unknown id; notifications and responses get no
//! reply.

#![no_main]

use std::sync::OnceLock;

use capfs::{Access, LocalFileSystem, Sandbox};
use capfs_wire::protocol::{INVALID_REQUEST, Message, UNKNOWN_REQUEST_ID};
use capfs_wire::server::{DEFAULT_MAX_MESSAGE_BYTES, Session};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    root: Vec<u8>,
    fs: LocalFileSystem,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::new()
            .with_root(dir.path(), Access::ReadWrite)
            .expect("root");
        let root = sandbox.roots()[0].path().to_string().into_bytes();
        std::fs::write(dir.path().join("a.txt"), b"hello").expect("seed file");
        std::fs::create_dir_all(dir.path().join("d/e")).expect("seed dir");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        Fixture {
            _dir: dir,
            root,
            fs: LocalFileSystem::new(sandbox),
            runtime,
        }
    })
}

fn expand_root(message: &[u8], root: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    let mut rest = message;
    while !rest.is_empty() {
        if rest.starts_with(b"$ROOT") {
            out.extend_from_slice(root);
            rest = &rest[5..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

fn assert_round_trips(message: &Message) {
    let text = message.to_text();
    let again = Message::from_slice(text.as_bytes())
        .unwrap_or_else(|e| panic!("{text} does not decode again: {e}"));
    assert_eq!(&again, message, "{text}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&stage, rest)) = data.split_first() else {
        return;
    };
    let fixture = fixture();
    let mut session = Session::new(DEFAULT_MAX_MESSAGE_BYTES);
    let mut messages: Vec<Vec<u8>> = Vec::new();
    if stage % 3 >= 1 {
        messages.push(br#"{"id":0,"method":"initialize","params":{"clientName":"fuzz"}}"#.to_vec());
    }
    if stage % 3 == 2 {
        messages.push(br#"{"method":"initialized"}"#.to_vec());
    }
    messages.extend(
        rest.split(|b| *b == 0xFF)
            .map(|m| expand_root(m, &fixture.root)),
    );

    fixture.runtime.block_on(async {
        for bytes in &messages {
            let decoded = Message::from_slice(bytes);
            if let Ok(message) = &decoded {
                assert_round_trips(message);
            }
            let reply = session.handle(&fixture.fs, bytes).await;
            if let Some(reply) = &reply {
                assert_round_trips(reply);
            }
            match (decoded, reply) {
                (Err(_), Some(Message::Error(error))) => {
                    assert_eq!(error.id, UNKNOWN_REQUEST_ID);
                    assert_eq!(error.error.code, INVALID_REQUEST);
                }
                (Ok(Message::Request(request)), Some(Message::Response(response))) => {
                    assert_eq!(response.id, request.id);
                }
                (Ok(Message::Request(request)), Some(Message::Error(error))) => {
                    assert_eq!(error.id, request.id);
                }
                (Ok(Message::Notification(_) | Message::Response(_) | Message::Error(_)), None) => {
                }
                (decoded, reply) => panic!("{decoded:?} answered with {reply:?}"),
            }
        }
    });
});
