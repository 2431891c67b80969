//! The bare echo beside the codex bench's round trips: what a call costs when the server does
//! nothing, from the same client, when the scheduler places the echo's thread as it did.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{BLOCK, ONE_AT_A_TIME, Server, block_reply, call, connect, next, request};

/// The cheapest WebSocket server tokio-tungstenite allows: its own thread with a
/// `current_thread` runtime, answering every text message with `reply`.
fn server(reply: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let reply = Message::text(reply.clone());
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    while let Some(Ok(message)) = ws.next().await {
                        if message.is_text() && ws.send(reply.clone()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
    });
    url
}

/// A connection to an echo server answering with capfs's own `fs/getMetadata` reply, and the
/// request's parameters.
async fn metadata_echo(capfs: &Server) -> (super::Ws, Value) {
    let mut ws = connect(&capfs.process.url).await;
    let stat = json!({"path": capfs.uri("small"), "sandbox": null});
    let reply = call(&mut ws, "fs/getMetadata", stat.clone()).await;
    let reply = json!({"id": 1, "result": reply["result"]}).to_string();
    let echo = server(reply);
    let (ws, _) = tokio_tungstenite::connect_async_with_config(&echo, None, true)
        .await
        .expect("connect to the echo server");
    (ws, stat)
}

/// The median round trip of the echo server, for a reply as long as capfs's `fs/getMetadata`.
pub(crate) async fn round_trip(capfs: &Server) -> Duration {
    let (mut ws, stat) = metadata_echo(capfs).await;
    let message = request(1, "fs/getMetadata", stat);
    let mut times = Vec::with_capacity(ONE_AT_A_TIME);
    for _ in 0..ONE_AT_A_TIME {
        let started = Instant::now();
        ws.send(message.clone()).await.unwrap();
        next(&mut ws).await;
        times.push(started.elapsed());
    }
    times.sort();
    times[ONE_AT_A_TIME / 2]
}

/// The same echo with calls in flight, as the bench makes them of a server (the echo sends each
/// reply as it comes: one write a reply). Measured in each of the bench's rounds, beside the
/// servers.
pub(crate) struct MetadataEcho {
    ws: super::Ws,
    stat: Value,
}

impl MetadataEcho {
    pub(crate) async fn start(capfs: &Server) -> Self {
        let (ws, stat) = metadata_echo(capfs).await;
        Self { ws, stat }
    }

    /// One round's calls a second.
    pub(crate) async fn round(&mut self) -> f64 {
        super::pipelined(&mut self.ws, "fs/getMetadata", &self.stat).await
    }
}

/// A bare echo of `fs/readBlock` replies, read as the bench reads them from a server (one
/// request at a time, the chunk found in each reply, not decoded): every reply the same text as
/// a server's, a 1 MiB block in base64. Measured in each of the bench's rounds, beside the
/// servers, so that the ratio compares rounds alike.
pub(crate) struct BlockEcho {
    ws: super::Ws,
}

impl BlockEcho {
    pub(crate) async fn start() -> Self {
        use base64::Engine;
        let block: Vec<u8> = (0..BLOCK).map(|i| (i * 7 + i / 251) as u8).collect();
        let chunk = base64::engine::general_purpose::STANDARD.encode(&block);
        let reply = json!({"id": 1, "result": {"chunk": chunk, "eof": false}}).to_string();
        let echo = server(reply);
        let (ws, _) = tokio_tungstenite::connect_async_with_config(&echo, None, true)
            .await
            .expect("connect to the echo server");
        Self { ws }
    }

    /// One round: 256 MiB by 1 MiB blocks, in MB/s.
    pub(crate) async fn round(&mut self) -> f64 {
        let blocks = 256;
        let started = Instant::now();
        let mut read = 0;
        for offset in 0..blocks {
            let params = json!({"handleId": "bench", "offset": offset * BLOCK, "len": BLOCK});
            self.ws
                .send(request(1, "fs/readBlock", params))
                .await
                .unwrap();
            read += block_reply(&mut self.ws).await.0;
        }
        assert_eq!(read, blocks * BLOCK);
        read as f64 / 1e6 / started.elapsed().as_secs_f64()
    }
}
