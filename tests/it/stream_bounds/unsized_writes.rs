//! Writes from a source of unknown size, write options, and streams against the read limit.

use super::*;

/// A reader that yields `data` in pieces of `piece` bytes, like a pipe.
struct Pipe {
    data: Vec<u8>,
    at: usize,
    piece: usize,
    fail_at: Option<usize>,
}

impl tokio::io::AsyncRead for Pipe {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.fail_at.is_some_and(|at| self.at >= at) {
            return std::task::Poll::Ready(Err(std::io::Error::other("the pipe broke")));
        }
        let n = self
            .piece
            .min(buf.remaining())
            .min(self.data.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(()))
    }
}

fn pipe(data: &[u8], fail_at: Option<usize>) -> Pipe {
    Pipe {
        data: data.to_vec(),
        at: 0,
        piece: 100_000,
        fail_at,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 1000) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsized_writes_work_on_every_backend() {
    let data = pattern(3 * 256 * 1024 + 5);
    for backend in [
        common::Backend::Local,
        common::Backend::Remote,
        common::Backend::Relay,
    ] {
        let env = common::env(backend).await;
        for (name, data) in [("empty", &[][..]), ("big", &data[..])] {
            let path = env.p(name);
            let n = env
                .fs
                .write_file_from(
                    &path,
                    &mut pipe(data, None),
                    None,
                    WriteOptions::default(),
                    &mut |_| {},
                )
                .await
                .unwrap_or_else(|e| panic!("{backend:?} {name}: {e}"));
            assert_eq!(n, data.len() as u64);
            assert_eq!(
                std::fs::read(env.ws_host(name)).unwrap(),
                data,
                "{backend:?}"
            );
        }
        // A pipe that breaks leaves the old file and nothing else.
        let before = names(&env.ws_host(""));
        let err = env
            .fs
            .write_file_from(
                &env.p("big"),
                &mut pipe(&data, Some(300_000)),
                None,
                WriteOptions::default(),
                &mut |_| {},
            )
            .await
            .unwrap_err();
        assert_ne!(err.kind(), ErrorKind::NotFound, "{backend:?}: {err}");
        assert_eq!(
            std::fs::read(env.ws_host("big")).unwrap(),
            data,
            "{backend:?}"
        );
        assert_eq!(names(&env.ws_host("")), before, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsized_write_ends_with_its_last_frame_even_an_empty_one() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("a")), "streamId": 1});
    send_request(&mut peer, 1, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 1, b"hello ").await;
    data_frame(&mut peer, DATA_FRAME_LAST_TAG, 1, b"world").await;
    let reply = peer.reply_to(&json!(1)).await;
    assert_eq!(reply["result"]["size"], 11, "{reply}");
    assert_eq!(std::fs::read(ws.join("a")).unwrap(), b"hello world");

    let params = json!({"path": text(&ws.join("b")), "streamId": 2});
    send_request(&mut peer, 2, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 2, b"bytes").await;
    data_frame(&mut peer, DATA_FRAME_LAST_TAG, 2, b"").await;
    let reply = peer.reply_to(&json!(2)).await;
    assert_eq!(reply["result"]["size"], 5, "{reply}");
    assert_eq!(std::fs::read(ws.join("b")).unwrap(), b"bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_options_set_the_mode_without_setuid_and_the_time() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for backend in [common::Backend::Local, common::Backend::Remote] {
        let env = common::env(backend).await;
        let options = WriteOptions::default()
            .with_mode(Some(0o4751))
            .with_modified_at_ms(Some(1_000_000_123));
        let path = env.p("m");
        env.fs
            .write_file_from(&path, &mut &b"abc"[..], Some(3), options, &mut |_| {})
            .await
            .unwrap();
        let metadata = std::fs::metadata(env.ws_host("m")).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o7777, 0o751, "{backend:?}");
        assert_eq!(metadata.mtime(), 1_000_000, "{backend:?}");
        assert_eq!(metadata.mtime_nsec(), 123_000_000, "{backend:?}");
        // An existing file keeps its bits when no mode is given.
        std::fs::set_permissions(env.ws_host("m"), std::fs::Permissions::from_mode(0o640)).unwrap();
        env.fs
            .write_file_from(
                &path,
                &mut &b"de"[..],
                Some(2),
                WriteOptions::default(),
                &mut |_| {},
            )
            .await
            .unwrap();
        let metadata = std::fs::metadata(env.ws_host("m")).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o7777, 0o640, "{backend:?}");
        assert_eq!(std::fs::read(env.ws_host("m")).unwrap(), b"de");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_not_bound_by_the_read_limit_but_read_file_is() {
    for backend in [
        common::Backend::Local,
        common::Backend::Remote,
        common::Backend::Relay,
    ] {
        let env = common::env_with_read_limit(backend, 1000).await;
        env.mkfile("big", &pattern(5000));
        let path = env.p("big");
        let err = env.fs.read_file(&path).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{backend:?}");
        assert!(
            err.to_string().contains("limit is 1000 bytes"),
            "{backend:?}: {err}"
        );
        let mut back = Vec::new();
        env.fs
            .read_file_to(&path, &mut back, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(back, pattern(5000), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_of_every_size_arrive_whole_sized_or_not() {
    // Hundreds of one-byte frames (each written from its own buffer, sixteen to a batch at
    // most), whole 256 KiB frames and an odd tail: the file is every frame's contents in order.
    let (_dir, ws) = workspace();
    let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let data = pattern(300 + 3 * (256 << 10) + 1000);
    let (tiny, rest) = data.split_at(300);
    let frames: Vec<&[u8]> = tiny.chunks(1).chain(rest.chunks(256 << 10)).collect();
    for (id, sized) in [(1, true), (2, false)] {
        let name = format!("f{id}");
        let mut params = json!({"path": text(&ws.join(&name)), "streamId": id});
        if sized {
            params["size"] = json!(data.len());
        }
        send_request(&mut peer, id, "capfs/writeFileStream", params).await;
        for frame in &frames {
            data_frame(&mut peer, 0, id as u64, frame).await;
        }
        if !sized {
            data_frame(&mut peer, DATA_FRAME_LAST_TAG, id as u64, b"").await;
        }
        let reply = peer.reply_to(&json!(id)).await;
        assert_eq!(reply["result"]["size"], data.len(), "{reply}");
        assert!(
            std::fs::read(ws.join(&name)).unwrap() == data,
            "{name} differs"
        );
    }
}
