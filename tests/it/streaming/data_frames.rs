//! Data frames: files of many sizes, files that change while they stream, and pings that must
//! never split a frame.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_many_sizes_round_trip_through_data_frames() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let fs = client(&server.url).await;
    assert!(fs.supports_data_frames());
    // Around the write threshold and the chunk size, and one several chunks long and ragged.
    for (i, len) in [0, 1, 65_535, 65_536, 262_144, 262_145, 3 * 262_144 + 17]
        .into_iter()
        .enumerate()
    {
        let path = AbsolutePathBuf::new(ws.join(format!("f{i}"))).unwrap();
        let data = pattern(len, i as u8);
        fs.write_file(&path, data.clone()).await.unwrap();
        assert_eq!(
            std::fs::read(ws.join(format!("f{i}"))).unwrap(),
            data,
            "{len}"
        );
        assert_eq!(fs.read_file(&path).await.unwrap(), data, "{len}");
    }
}

/// A file cut short and written again while it streams: every read ends with the frames it
/// announced (the client checks the count), every byte is the file's own at its offset (no frame
/// header inside the data), and the connection stays whole for the next call. A read racing a
/// truncation may see zeros where the kernel had cut, with or without a server, so the file
/// holds no zero byte and a zero is let pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_resized_while_it_streams_gives_whole_frames() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let fs = client(&server.url).await;
    let host = ws.join("shifting");
    let data: Vec<u8> = pattern(3 << 20, 9).into_iter().map(|b| b | 1).collect();
    std::fs::write(&host, &data).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let (stop, host, data) = (Arc::clone(&stop), host.clone(), data.clone());
        std::thread::spawn(move || {
            let file = std::fs::File::options().write(true).open(&host).unwrap();
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let cut = (rounds * 181_019) % data.len() as u64;
                file.set_len(cut).unwrap();
                file.write_all_at(&data[cut as usize..], cut).unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    let path = AbsolutePathBuf::new(host).unwrap();
    let (mut short, mut whole) = (0, 0);
    for _ in 0..60 {
        let mut got = Vec::new();
        let n = fs.read_file_to(&path, &mut got, &mut |_| {}).await.unwrap();
        assert_eq!(n, got.len() as u64);
        assert!(got.len() <= data.len(), "{} bytes", got.len());
        let foreign = got.iter().zip(&data).position(|(a, b)| a != b && *a != 0);
        if let Some(at) = foreign {
            panic!("byte {at} of {} is not the file's", got.len());
        }
        if got.len() == data.len() {
            whole += 1;
        } else {
            short += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = attacker.join().unwrap();
    assert!(rounds > 0, "the attacker never ran");
    let metadata = fs.get_metadata(&path).await.unwrap();
    assert_eq!(
        metadata.size,
        data.len() as u64,
        "{short} short, {whole} whole"
    );
}

/// A file whose pages are not in the page cache: the server reads those frames on its blocking
/// pool instead of its connection thread, and they arrive like the others. Where the kernel
/// cannot drop the file's pages (tmpfs), only the second half of this holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_from_the_disk_streams_like_a_cached_one() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let fs = client(&server.url).await;
    let data = pattern(6 << 20, 11);
    let host = ws.join("cold");
    std::fs::write(&host, &data).unwrap();
    let file = std::fs::File::open(&host).unwrap();
    file.sync_all().unwrap();
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    let mut probe = [0u8; 4096];
    let cached = rustix::io::preadv2(
        &file,
        &mut [std::io::IoSliceMut::new(&mut probe)],
        0,
        rustix::io::ReadWriteFlags::NOWAIT,
    );
    if cached.is_ok() {
        eprintln!("the kernel kept the file's pages: the frames come from the page cache");
    }
    let mut got = Vec::new();
    let path = AbsolutePathBuf::new(host).unwrap();
    let n = fs.read_file_to(&path, &mut got, &mut |_| {}).await.unwrap();
    assert_eq!(n, data.len() as u64);
    assert!(
        got == data,
        "the {} bytes that arrived are not the file",
        got.len()
    );
}

/// A peer that pings while it downloads: the server answers each ping with a pong while its
/// writer may be in the middle of a data frame (the socket full), and no pong may land inside a
/// frame. Every data frame must arrive whole and in order, and the reply must count them all.
/// Against `capfs serve` (connection threads) and against a server on this test's work-stealing
/// runtime, where the pong and the frame are written from two threads at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_during_a_download_never_split_a_data_frame() {
    let (_dir, ws) = workspace();
    let data = pattern(24 << 20, 5);
    std::fs::write(ws.join("big"), &data).unwrap();
    let server = ServerProcess::start(&ws).await;
    download_while_pinging(&server.url, &ws, &data).await;
    let sandbox = Sandbox::new().with_root(&ws, Access::ReadWrite).unwrap();
    let fs = Arc::new(LocalFileSystem::new(sandbox));
    let in_process = InProcessServer::start(fs, ServerConfig::default()).await;
    download_while_pinging(&in_process.url, &ws, &data).await;
}

async fn download_while_pinging(url: &str, ws: &Path, data: &[u8]) {
    let mut peer = RawPeer::ready(url).await;
    let params = json!({"path": ws.join("big"), "streamId": 77});
    let request =
        json!({"jsonrpc": "2.0", "id": 900, "method": "capfs/readFileStream", "params": params});
    peer.ws
        .send(WsMessage::text(request.to_string()))
        .await
        .unwrap();
    let (mut got, mut pongs, mut pings) = (Vec::new(), 0, 0);
    let reply = loop {
        let frame = tokio::time::timeout(WAIT, peer.ws.next())
            .await
            .expect("the server sends in time")
            .expect("the connection stays open")
            .expect("every frame is well-formed");
        match frame {
            WsMessage::Binary(bytes) => {
                assert_eq!(bytes[0], 0, "a data frame's tag");
                assert_eq!(&bytes[1..9], &77u64.to_be_bytes(), "the stream id");
                got.extend_from_slice(&bytes[9..]);
                // A ping after every frame, while the server keeps the socket full.
                peer.ws
                    .send(WsMessage::Ping(vec![1, 2, 3].into()))
                    .await
                    .unwrap();
                pings += 1;
            }
            WsMessage::Pong(_) => pongs += 1,
            WsMessage::Text(text) => {
                break serde_json::from_str::<serde_json::Value>(&text).unwrap();
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(reply["result"]["size"], data.len(), "{reply}");
    all_arrived_with_pongs(&got, data, pings, pongs);
}

/// A transfer under pings: every byte arrived, in order, and pings were sent and answered.
fn all_arrived_with_pongs(got: &[u8], data: &[u8], pings: usize, pongs: usize) {
    assert!(
        got == data,
        "{} bytes of {} arrived, or not in order",
        got.len(),
        data.len()
    );
    assert!(pings > 0 && pongs > 0, "{pings} pings, {pongs} pongs");
}

/// The client writes a streamed write's data frames into the socket itself, while its reader
/// task's tungstenite answers pings on the same socket. A server that pings after every data
/// frame it receives: the client's writer may be in the middle of a frame (the socket full), and
/// no pong may land inside it. The server's tungstenite refuses anything but whole, masked
/// frames; every frame must carry the stream's id and the contents arrive whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_during_an_upload_never_split_a_data_frame() {
    let data = pattern(24 << 20, 7);
    // A small receive buffer keeps the client's socket full: its frames go out in parts.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let (mut got, mut pings, mut pongs) = (Vec::new(), 0, 0);
        let mut upload: Option<(serde_json::Value, u64, usize)> = None;
        loop {
            let frame = tokio::time::timeout(WAIT, ws.next())
                .await
                .expect("the client sends in time")
                .expect("the connection stays open")
                .expect("every frame is whole and masked");
            match frame {
                WsMessage::Text(text) => {
                    let request: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let params = &request["params"];
                    let result = match request["method"].as_str().unwrap_or("") {
                        "initialize" => frames_server_initialized(),
                        "capfs/writeFileStream" => {
                            let (stream, size) = (&params["streamId"], &params["size"]);
                            let size = size.as_u64().unwrap() as usize;
                            upload = Some((request["id"].clone(), stream.as_u64().unwrap(), size));
                            continue;
                        }
                        _ => continue,
                    };
                    let reply = json!({"id": request["id"], "result": result});
                    ws.send(WsMessage::text(reply.to_string())).await.unwrap();
                }
                WsMessage::Binary(bytes) => {
                    let (id, stream, size) = upload.clone().expect("frames after the request");
                    assert_eq!(bytes[0], 0, "a data frame's tag");
                    assert_eq!(&bytes[1..9], &stream.to_be_bytes(), "the stream id");
                    got.extend_from_slice(&bytes[9..]);
                    if got.len() >= size {
                        let reply = json!({"id": id, "result": {"size": got.len()}});
                        ws.send(WsMessage::text(reply.to_string())).await.unwrap();
                        break;
                    }
                    // A ping after every frame, while the client keeps the socket full.
                    ws.send(WsMessage::Ping(vec![4, 5, 6].into()))
                        .await
                        .unwrap();
                    pings += 1;
                }
                WsMessage::Pong(_) => pongs += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        (got, pings, pongs)
    });
    let fs = client(&url).await;
    let path = AbsolutePathBuf::new("/ws/big").unwrap();
    let size = Some(data.len() as u64);
    let written = fs
        .write_file_from(
            &path,
            &mut data.as_slice(),
            size,
            WriteOptions::default(),
            &mut |_| {},
        )
        .await
        .unwrap();
    assert_eq!(written, data.len() as u64);
    let (got, pings, pongs) = server.await.unwrap();
    all_arrived_with_pongs(&got, &data, pings, pongs);
}
