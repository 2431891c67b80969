//! Streams that stall or abort, stream slots, and the reply limit.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_data_frame_aborts_a_write_at_once_and_leaves_the_old_file() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"old contents").unwrap();
    let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("f")), "streamId": 3, "size": 10});
    send_request(&mut peer, 7, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 3, b"12345").await;
    data_frame(&mut peer, 0, 3, b"").await;
    let reply = peer.reply_to(&json!(7)).await;
    let (_, kind, message) = error_of(&reply);
    assert_eq!(kind, Some("ConnectionAborted"), "{reply}");
    assert!(message.contains("aborted"), "{message}");
    assert_eq!(std::fs::read(ws.join("f")).unwrap(), b"old contents");
    assert_eq!(names(&ws), ["f"]);
    // The connection carries on.
    let reply = peer
        .request("fs/getMetadata", json!({"path": text(&ws.join("f"))}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_streamed_write_times_out_and_leaves_the_old_file() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"old contents").unwrap();
    let config = ServerConfig::default().with_stream_idle_timeout(Duration::from_millis(300));
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for (id, sent) in [(7, &b"12345"[..]), (8, &b""[..])] {
        let params = json!({"path": text(&ws.join("f")), "streamId": id, "size": 10});
        send_request(&mut peer, id, "capfs/writeFileStream", params).await;
        if !sent.is_empty() {
            data_frame(&mut peer, 0, id as u64, sent).await;
        }
        let reply = peer.reply_to(&json!(id)).await;
        let (_, kind, _) = error_of(&reply);
        assert_eq!(kind, Some("TimedOut"), "{reply}");
    }
    assert_eq!(std::fs::read(ws.join("f")).unwrap(), b"old contents");
    assert_eq!(names(&ws), ["f"]);
}

/// Wraps a file system and reports the outcome of every `read_file_to`.
struct Watched {
    inner: Arc<dyn ExecutorFileSystem>,
    reads: tokio::sync::mpsc::UnboundedSender<std::io::Result<u64>>,
}

#[async_trait]
impl ExecutorFileSystem for Watched {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        self.inner.read_file(path).await
    }
    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let result = self.inner.read_file_to(path, writer, progress).await;
        let copy = match &result {
            Ok(n) => Ok(*n),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        };
        let _ = self.reads.send(copy);
        result
    }
    async fn write_file(&self, path: &AbsolutePathBuf, data: Vec<u8>) -> FileSystemResult<()> {
        self.inner.write_file(path, data).await
    }
    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        self.inner.create_directory(path, options).await
    }
    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        self.inner.get_metadata(path).await
    }
    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        self.inner.read_directory(path).await
    }
    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        self.inner.remove(path, options).await
    }
    async fn copy(
        &self,
        a: &AbsolutePathBuf,
        b: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        self.inner.copy(a, b, options).await
    }
    async fn rename(
        &self,
        a: &AbsolutePathBuf,
        b: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        self.inner.rename(a, b, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_read_to_a_peer_that_stops_reading_times_out() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("big"), vec![1u8; 48 << 20]).unwrap();
    let (reads, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let fs = Arc::new(Watched {
        inner: local(&ws),
        reads,
    });
    let config = ServerConfig::default().with_stream_idle_timeout(Duration::from_millis(300));
    let server = InProcessServer::start(fs, config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("big")), "streamId": 1});
    send_request(&mut peer, 9, "capfs/readFileStream", params).await;
    let outcome = tokio::time::timeout(WAIT, outcomes.recv())
        .await
        .expect("the stalled read ended in time")
        .expect("an outcome");
    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::TimedOut);
    drop(peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_writes_filling_every_slot_never_block_the_data_they_wait_for() {
    let (_dir, ws) = workspace();
    let config = ServerConfig::default().with_max_in_flight(8);
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    // Every in-flight slot taken by a streamed write waiting for its data...
    for id in 1..=8 {
        let params = json!({"path": text(&ws.join(format!("w{id}"))), "streamId": id, "size": 4});
        send_request(&mut peer, id, "capfs/writeFileStream", params).await;
    }
    // ...then ordinary requests, which must wait for a slot without stopping the reader...
    for id in 100..104 {
        send_request(
            &mut peer,
            id,
            "fs/readDirectory",
            json!({"path": text(&ws)}),
        )
        .await;
    }
    // ...then the data the writes wait for.
    for id in 1..=8 {
        data_frame(&mut peer, 0, id as u64, b"data").await;
    }
    for reply in replies(&mut peer, (1..=8).chain(100..104)).await {
        assert!(reply.get("result").is_some(), "{reply}");
    }
    for id in 1..=8 {
        assert_eq!(std::fs::read(ws.join(format!("w{id}"))).unwrap(), b"data");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_file_reply_over_the_message_limit_is_refused_with_the_streamed_method() {
    let (_dir, ws) = workspace();
    let limit = 1 << 20;
    let config = ServerConfig::default().with_max_message_bytes(limit);
    // Its base64 (4/3 of it) exceeds the limit; the smaller one's fits.
    std::fs::write(ws.join("big"), vec![1u8; 900 * 1024]).unwrap();
    std::fs::write(ws.join("small"), vec![2u8; 600 * 1024]).unwrap();
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let reply = peer
        .request("fs/readFile", json!({"path": text(&ws.join("big"))}))
        .await;
    let (_, kind, message) = error_of(&reply);
    assert_eq!(kind, Some("InvalidInput"), "{reply}");
    assert!(message.contains(&limit.to_string()), "{message}");
    assert!(message.contains("capfs/readFileStream"), "{message}");
    let reply = peer
        .request("fs/readFile", json!({"path": text(&ws.join("small"))}))
        .await;
    let data = reply["result"]["dataBase64"].as_str().expect("contents");
    assert_eq!(data.len(), 600 * 1024 / 3 * 4);
    // The streamed read carries the big one whatever the message limit.
    let fs = client(&server.url).await;
    let mut back = Vec::new();
    let n = fs
        .read_file_to(&abs(&ws.join("big")), &mut back, &mut |_| {})
        .await
        .unwrap();
    assert_eq!((n, back.len()), (900 * 1024, 900 * 1024));
}
