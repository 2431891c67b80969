//! Small calls without `RemoteFileSystem`: a plain tokio-tungstenite client, the cheapest
//! WebSocket server answering with canned bytes, and the trait-level call loops beside them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::RemoteFileSystem;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::measure::current_thread;

pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A plain tokio-tungstenite client connection (Nagle off), in one task: what any client of the
/// protocol can do without `RemoteFileSystem`.
pub(crate) async fn raw_connect(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .expect("connect");
    ws
}

pub(crate) async fn next_text(ws: &mut Ws) -> Utf8Bytes {
    loop {
        match ws.next().await.expect("connection open").expect("frame") {
            Message::Text(text) => return text,
            _ => continue,
        }
    }
}

/// A raw connection to capfs, past `initialize`/`initialized`.
pub(crate) async fn raw_capfs(url: &str) -> Ws {
    let mut ws = raw_connect(url).await;
    let initialize = r#"{"id":0,"method":"initialize","params":{"clientName":"bench"}}"#;
    ws.send(Message::text(initialize)).await.unwrap();
    let reply = next_text(&mut ws).await;
    assert!(reply.contains("\"result\""), "initialize failed: {reply}");
    ws.send(Message::text(r#"{"method":"initialized"}"#))
        .await
        .unwrap();
    ws
}

/// Sends `request` once and returns the reply, checking that it is a result.
pub(crate) async fn call_once(ws: &mut Ws, request: &Message) -> Utf8Bytes {
    ws.send(request.clone()).await.unwrap();
    let reply = next_text(ws).await;
    assert!(reply.contains("\"result\""), "call failed: {reply}");
    reply
}

/// The cheapest WebSocket server tokio-tungstenite allows: its own thread with a
/// `current_thread` runtime, one task per connection that reads a message and answers it with
/// `reply` (the same bytes every time), batching answers to messages that are already read into
/// one flush as capfs does. Returns its URL; it lives as long as the process.
pub(crate) fn canned_server(reply: Utf8Bytes) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        current_thread().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let reply = Message::Text(reply.clone());
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    while let Some(Ok(message)) = ws.next().await {
                        if !message.is_text() {
                            continue;
                        }
                        if ws.feed(reply.clone()).await.is_err() {
                            return;
                        }
                        while let Some(Some(Ok(more))) = ws.next().now_or_never() {
                            if more.is_text() && ws.feed(reply.clone()).await.is_err() {
                                return;
                            }
                        }
                        if ws.flush().await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
    });
    url
}

/// `n` round trips of `request` one at a time, appended to `out`; every reply must be
/// `reply_len` bytes (a result, not an error).
pub(crate) async fn raw_round_trips(
    ws: &mut Ws,
    request: &Message,
    reply_len: usize,
    n: usize,
    out: &mut Vec<Duration>,
) {
    for _ in 0..n {
        let started = Instant::now();
        ws.send(request.clone()).await.unwrap();
        let reply = next_text(ws).await;
        out.push(started.elapsed());
        assert_eq!(reply.len(), reply_len, "unexpected reply: {reply}");
    }
}

/// Calls per second with `depth` copies of `request` outstanding on one raw connection, from
/// one task: replies that are already read are answered with new requests in one flush.
pub(crate) async fn raw_pipelined(
    ws: &mut Ws,
    request: &Message,
    reply_len: usize,
    total: usize,
    depth: usize,
) -> f64 {
    let started = Instant::now();
    let mut sent = 0;
    while sent < depth.min(total) {
        ws.feed(request.clone()).await.unwrap();
        sent += 1;
    }
    ws.flush().await.unwrap();
    let mut received = 0;
    while received < total {
        let mut reply = Some(next_text(ws).await);
        while let Some(text) = reply.take() {
            assert_eq!(text.len(), reply_len, "unexpected reply: {text}");
            received += 1;
            if sent < total {
                ws.feed(request.clone()).await.unwrap();
                sent += 1;
            }
            if let Some(Some(Ok(Message::Text(more)))) = ws.next().now_or_never() {
                reply = Some(more);
            }
        }
        ws.flush().await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// `n` calls of `call` one at a time, appended to `out`.
pub(crate) async fn trait_round_trips<F, Fut>(n: usize, out: &mut Vec<Duration>, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for _ in 0..n {
        let started = Instant::now();
        call().await;
        out.push(started.elapsed());
    }
}

/// One call of the small-call shape `index` (0: getMetadata, 1: readFile, 2: readDirectory).
pub(crate) async fn trait_call(fs: &RemoteFileSystem, index: usize, path: &AbsolutePathBuf) {
    match index {
        0 => drop(fs.get_metadata(path).await.unwrap()),
        1 => assert_eq!(fs.read_file(path).await.unwrap().len(), 4096),
        _ => assert_eq!(fs.read_directory(path).await.unwrap().len(), 100),
    }
}

/// Calls per second of `get_metadata` from `depth` tasks sharing one `RemoteFileSystem`.
pub(crate) async fn trait_pipelined(
    fs: &Arc<RemoteFileSystem>,
    path: &AbsolutePathBuf,
    total: usize,
    depth: usize,
) -> f64 {
    trait_call_pipelined(fs, 0, path, total, depth).await
}

/// Calls per second of the small-call shape `index` from `depth` tasks sharing one
/// `RemoteFileSystem`, `total / depth` calls each.
pub(crate) async fn trait_call_pipelined(
    fs: &Arc<RemoteFileSystem>,
    index: usize,
    path: &AbsolutePathBuf,
    total: usize,
    depth: usize,
) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..depth {
        let fs = Arc::clone(fs);
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..total / depth {
                trait_call(&fs, index, &path).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (total / depth * depth) as f64 / started.elapsed().as_secs_f64()
}
