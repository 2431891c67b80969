//! What one client can hold: blocking threads, file-work permits, and a hung call beside the
//! read loop.

use super::*;

#[test]
fn streamed_writes_waiting_for_data_hold_no_blocking_thread() {
    small_pool_runtime(4).block_on(async {
        let (_dir, ws) = workspace();
        let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
        // Twice as many stalled writes as the pool has threads, on two connections.
        let mut hostile = Vec::new();
        for c in 0..2 {
            let mut peer = RawPeer::ready(&server.url).await;
            for i in 0..4 {
                let path = text(&ws.join(format!("stalled-{c}-{i}")));
                let params = json!({"path": path, "streamId": i + 1, "size": 10});
                send_request(&mut peer, 100 + i, "capfs/writeFileStream", params).await;
                data_frame(&mut peer, 0, (i + 1) as u64, b"12345").await;
            }
            // Once this is answered, the connection has read the writes and started them.
            let stat = json!({"path": text(&ws)});
            let reply = peer.request("fs/getMetadata", stat).await;
            assert!(reply.get("result").is_some(), "{reply}");
            hostile.push(peer);
        }
        everyday_calls_succeed(&server.url, &ws, "writes").await;
        drop(hostile);
    });
}

#[test]
fn streamed_reads_to_a_peer_that_never_reads_hold_no_blocking_thread() {
    small_pool_runtime(4).block_on(async {
        let (_dir, ws) = workspace();
        // Larger than the connection's queue of frames and the socket buffers together.
        std::fs::write(ws.join("big"), vec![7u8; 48 << 20]).unwrap();
        let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
        let mut hostile = Vec::new();
        for c in 0..6 {
            let mut peer = RawPeer::ready(&server.url).await;
            let params = json!({"path": text(&ws.join("big")), "streamId": c + 1});
            send_request(&mut peer, 10, "capfs/readFileStream", params).await;
            // One frame shows the read is sending; then this peer never reads again.
            let first = tokio::time::timeout(WAIT, peer.ws.next()).await;
            let started = matches!(first, Ok(Some(Ok(WsMessage::Binary(_)))));
            assert!(
                started,
                "read {c} never sent a frame (no thread left for it?): {first:?}"
            );
            hostile.push(peer);
        }
        // Repeated: the reads fill their queues and socket buffers within moments, and a
        // server that parks a thread per read then has none left for these.
        for round in 0..20 {
            everyday_calls_succeed(&server.url, &ws, &format!("reads-{round}")).await;
        }
        drop(hostile);
    });
}

/// A file system whose `get_metadata` blocks until released, counting how many calls are in it
/// at once; everything else is answered at once.
struct Gate {
    inside: AtomicUsize,
    most: AtomicUsize,
    open: tokio::sync::Semaphore,
    entered: tokio::sync::Notify,
}

impl Gate {
    fn closed() -> Arc<Self> {
        Arc::new(Self {
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            open: tokio::sync::Semaphore::new(0),
            entered: tokio::sync::Notify::new(),
        })
    }
}

struct Gated(Arc<Gate>);

#[async_trait]
impl ExecutorFileSystem for Gated {
    async fn read_file(&self, _: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        Ok(Vec::new())
    }
    async fn write_file(&self, _: &AbsolutePathBuf, _: Vec<u8>) -> FileSystemResult<()> {
        Ok(())
    }
    async fn create_directory(
        &self,
        _: &AbsolutePathBuf,
        _: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
    async fn get_metadata(&self, _: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        let gate = &self.0;
        let now = gate.inside.fetch_add(1, Ordering::SeqCst) + 1;
        gate.most.fetch_max(now, Ordering::SeqCst);
        gate.entered.notify_waiters();
        let permit = gate.open.acquire().await.expect("gate open");
        permit.forget();
        gate.inside.fetch_sub(1, Ordering::SeqCst);
        Ok(FileMetadata::default())
    }
    async fn read_directory(
        &self,
        _: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        Ok(Vec::new())
    }
    async fn remove(&self, _: &AbsolutePathBuf, _: RemoveOptions) -> FileSystemResult<()> {
        Ok(())
    }
    async fn copy(
        &self,
        _: &AbsolutePathBuf,
        _: &AbsolutePathBuf,
        _: CopyOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
    async fn rename(
        &self,
        _: &AbsolutePathBuf,
        _: &AbsolutePathBuf,
        _: RenameOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
}

/// Waits (bounded) until `gate` has `n` calls inside.
async fn until_inside(gate: &Gate, n: usize) {
    tokio::time::timeout(WAIT, async {
        loop {
            let entered = gate.entered.notified();
            if gate.inside.load(Ordering::SeqCst) >= n {
                return;
            }
            entered.await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} calls never got inside"));
}

/// Starts `per_connection` getMetadata calls on each of `connections` connections of a server
/// over a gated file system, and returns the most calls that were inside at once.
async fn most_at_once(
    config: ServerConfig,
    connections: usize,
    per_connection: i64,
    expect: usize,
) {
    let gate = Gate::closed();
    let server = InProcessServer::start(Arc::new(Gated(Arc::clone(&gate))), config).await;
    let mut peers = Vec::new();
    for _ in 0..connections {
        let mut peer = RawPeer::ready(&server.url).await;
        for id in 0..per_connection {
            send_request(&mut peer, 10 + id, "fs/getMetadata", json!({"path": "/x"})).await;
        }
        peers.push(peer);
    }
    until_inside(&gate, expect).await;
    // Let every call through one at a time; at no point may more than `expect` be inside.
    let total = connections * per_connection as usize;
    gate.open.add_permits(total);
    for peer in &mut peers {
        for reply in replies(peer, (0..per_connection).map(|id| 10 + id)).await {
            assert!(reply.get("result").is_some(), "{reply}");
        }
    }
    assert_eq!(gate.most.load(Ordering::SeqCst), expect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_work_is_bounded_per_connection() {
    let config = ServerConfig::default().with_max_blocking_per_connection(3);
    most_at_once(config, 1, 12, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_work_is_bounded_across_the_server() {
    let config = ServerConfig::default().with_max_blocking(4);
    most_at_once(config, 3, 6, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_file_system_call_does_not_stall_the_read_loop() {
    let gate = Gate::closed();
    let server =
        InProcessServer::start(Arc::new(Gated(Arc::clone(&gate))), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    send_request(&mut peer, 5, "fs/getMetadata", json!({"path": "/x"})).await;
    until_inside(&gate, 1).await;
    // The getMetadata hangs; the connection still reads and answers the next request.
    let reply = peer
        .request("fs/readDirectory", json!({"path": "/x"}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    gate.open.add_permits(1);
    let reply = peer.reply_to(&json!(5)).await;
    assert!(reply.get("result").is_some(), "{reply}");
}
