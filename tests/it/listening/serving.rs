//! Refused params in the audit log, names that are not UTF-8, and connection threads.

use super::*;

#[tokio::test]
async fn requests_refused_while_their_params_are_parsed_are_audited_as_sent() {
    let (dir, ws) = workspace();
    let audit_file = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit_file).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let long = format!("/{}", "y".repeat(5_000));
    let target = ws.join("t").display().to_string();
    let sent = [
        ("fs/readFile", json!({"path": "relative/x"})),
        ("fs/getMetadata", json!({"path": 7})),
        ("fs/copy", json!({"sourcePath": "/a"})),
        (
            "fs/rename",
            json!({"sourcePath": long, "destinationPath": "/b\u{0}c"}),
        ),
        ("fs/writeFile", json!({"path": target, "dataBase64": "!!"})),
    ];
    for (method, params) in &sent {
        let reply = peer.request(method, params.clone()).await;
        let (_, kind, _) = error_of(&reply);
        assert_eq!(kind, Some("InvalidInput"), "{method}: {reply}");
    }
    drop(peer);
    server.stop().await;
    let lines: Vec<Value> = std::fs::read_to_string(&audit_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let paths: Vec<&Value> = lines
        .iter()
        .filter(|l| l["method"] != "initialize")
        .map(|l| &l["paths"])
        .collect();
    let cut_long = format!("/{}…[cut 4001 bytes]", "y".repeat(999));
    assert_eq!(
        paths,
        [
            &json!(["relative/x"]),
            &json!(["7"]),
            &json!(["/a"]),
            &json!([cut_long, "/b\u{0}c"]),
            &json!([target]),
        ]
    );
}

#[tokio::test]
async fn a_listed_name_reaches_that_entry_and_no_other() {
    let (_dir, ws) = workspace();
    let genuine = "a\u{FFFD}";
    let raw = |bytes: &[u8]| ws.join(OsStr::from_bytes(bytes));
    std::fs::write(raw(b"a\xff"), "not utf-8 (ff)").unwrap();
    std::fs::write(raw(b"a\xfe"), "not utf-8 (fe)").unwrap();
    std::fs::write(ws.join(genuine), "genuine").unwrap();
    std::fs::write(ws.join("plain"), "plain").unwrap();
    let server = ServerProcess::start(&ws).await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let mut names: Vec<String> = fs
        .read_directory(&abs(&ws))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file_name)
        .collect();
    names.sort();
    assert_eq!(names, [genuine, "plain"]);
    // Every listed name leads to its own entry: removing the one that looks like the others
    // removes exactly that file.
    assert_eq!(
        fs.read_file(&abs(&ws.join(genuine))).await.unwrap(),
        b"genuine"
    );
    fs.remove(&abs(&ws.join(genuine)), capfs::RemoveOptions::default())
        .await
        .unwrap();
    assert!(!ws.join(genuine).exists());
    assert_eq!(std::fs::read(raw(b"a\xff")).unwrap(), b"not utf-8 (ff)");
    assert_eq!(std::fs::read(raw(b"a\xfe")).unwrap(), b"not utf-8 (fe)");
    // On the wire, the entries left out are counted.
    let mut peer = RawPeer::ready(&server.url).await;
    let listing = peer.request("fs/readDirectory", json!({"path": ws})).await;
    assert_eq!(listing["result"]["nonUtf8NamesOmitted"], 2, "{listing}");
    assert_eq!(listing["result"]["entries"].as_array().unwrap().len(), 1);
    drop((fs, peer));
    server.stop().await;
}

/// `--threads 0` serves every connection on the accepting thread, `--threads 1` on one thread
/// beside it: both serve clients at once, streams included, and stop cleanly.
#[tokio::test]
async fn any_thread_count_serves_clients_at_once() {
    for threads in ["0", "1", "3"] {
        let (_dir, ws) = workspace();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(ws.join("big"), &data).unwrap();
        let args = [
            "--root".as_ref(),
            ws.as_os_str(),
            "--threads".as_ref(),
            threads.as_ref(),
        ];
        let server = ServerProcess::start_with(&args, &[]).await;
        let mut clients = Vec::new();
        for _ in 0..4 {
            let client = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
                .await
                .unwrap();
            clients.push(client);
        }
        let path = abs(&ws.join("big"));
        let reads = futures_util::future::join_all(clients.iter().map(|c| c.read_file(&path)));
        for read in reads.await {
            assert!(read.unwrap() == data, "--threads {threads}");
        }
        drop(clients);
        server.stop().await;
    }
}

/// How many threads of this process run a server's connections (their names, cut to the
/// kernel's 15 bytes).
fn connection_thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("capfs-connectio"))
        .count()
}

/// A server whose connections run on threads of their own (what `capfs serve` does): every
/// client is served, the threads end when the server stops, and a server whose future is
/// dropped closes the connections it was running. The only test of this process that starts
/// such threads, so that the count is its own.
#[tokio::test]
async fn connection_threads_serve_every_client_and_end_with_the_server() {
    use capfs::{Access, LocalFileSystem, Sandbox};
    use capfs_wire::server::{Server, ServerConfig};

    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"hello").unwrap();
    let start = || async {
        let sandbox = Sandbox::new().with_root(&ws, Access::ReadWrite).unwrap();
        let fs: Arc<dyn ExecutorFileSystem> = Arc::new(LocalFileSystem::new(sandbox));
        let config = ServerConfig::default().with_connection_threads(3);
        Server::bind(fs, config).await.unwrap()
    };

    let server = start().await;
    let url = server.url().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    let mut clients = Vec::new();
    for _ in 0..7 {
        let client = RemoteFileSystem::connect(&url, RemoteOptions::default())
            .await
            .unwrap();
        clients.push(client);
    }
    assert_eq!(connection_thread_count(), 3);
    let path = abs(&ws.join("f"));
    let reads = futures_util::future::join_all(clients.iter().map(|c| c.read_file(&path))).await;
    for read in reads {
        assert_eq!(read.unwrap(), b"hello");
    }
    // A write through one connection is seen through every other, whichever thread runs it.
    let written = abs(&ws.join("written"));
    clients[0]
        .write_file(&written, b"new".to_vec())
        .await
        .unwrap();
    for client in &clients[1..] {
        assert_eq!(client.read_file(&written).await.unwrap(), b"new");
    }
    drop(clients);
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, serving)
        .await
        .expect("the server stopped in time")
        .unwrap()
        .unwrap();
    assert_eq!(connection_thread_count(), 0, "threads outlived the server");

    let server = start().await;
    let url = server.url().to_string();
    let serving = tokio::spawn(server.run_until(std::future::pending()));
    let mut peer = RawPeer::ready(&url).await;
    serving.abort();
    let _ = serving.await;
    let next = tokio::time::timeout(WAIT, peer.ws.next())
        .await
        .expect("the connection ended in time");
    assert!(
        matches!(next, None | Some(Err(_)) | Some(Ok(WsMessage::Close(_)))),
        "{next:?}"
    );
}
