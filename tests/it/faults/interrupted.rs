//! A server killed mid-overwrite and a client gone mid-upload.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_overwrite_leaves_old_or_new_files_never_a_mix() {
    const FILES: usize = 8;
    let (_dir, ws) = workspace();
    for file in 0..FILES {
        std::fs::write(ws.join(format!("f{file}")), version_contents(file, 0)).unwrap();
    }
    let mut server = ServerProcess::start(&ws).await;
    let fs = Arc::new(connect(&server.url).await);
    // The highest version each file was ever asked to hold.
    let issued: Arc<Vec<AtomicU64>> = Arc::new((0..FILES).map(|_| AtomicU64::new(0)).collect());
    let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for file in 0..FILES {
        let fs = Arc::clone(&fs);
        let issued = Arc::clone(&issued);
        let written = written_tx.clone();
        let path = abs(&ws.join(format!("f{file}")));
        writers.push(tokio::spawn(async move {
            for version in 1.. {
                issued[file].store(version, Ordering::SeqCst);
                if let Err(e) = fs.write_file(&path, version_contents(file, version)).await {
                    return e;
                }
                let _ = written.send(());
            }
            unreachable!("the server dies first")
        }));
    }
    // Kill once the overwrites are well under way: 40 of them have completed.
    for _ in 0..40 {
        tokio::time::timeout(WAIT, written.recv())
            .await
            .expect("overwrites complete in time");
    }
    server.child.start_kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    for writer in writers {
        let err = tokio::time::timeout_at((killed + Duration::from_secs(1)).into(), writer)
            .await
            .expect("a pending write failed within a second of the kill")
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    }
    tokio::time::timeout(WAIT, server.child.wait())
        .await
        .expect("the killed server was reaped")
        .unwrap();

    // A write's temporary file is anonymous (O_TMPFILE) while it is filled, but Linux cannot
    // rename an anonymous file over a name: cap-tempfile links it under a random name and then
    // renames that. A kill between those two calls leaves the linked name behind. It always
    // holds a whole new version (it is linked only once filled); nothing else may be there.
    let expected_names: BTreeSet<String> = (0..FILES).map(|f| format!("f{f}")).collect();
    let leftovers: Vec<String> = names_in(&ws).difference(&expected_names).cloned().collect();
    assert!(leftovers.len() <= FILES, "{leftovers:?}");
    for name in &leftovers {
        let contents = std::fs::read(ws.join(name)).unwrap();
        let whole = (0..FILES).any(|file| version_of(file, &contents).is_some());
        assert!(whole, "{name} is not a whole version of any file");
        std::fs::remove_file(ws.join(name)).unwrap();
    }
    for file in 0..FILES {
        assert!(
            names_in(&ws).contains(&format!("f{file}")),
            "f{file} is gone"
        );
    }
    let mut versions = Vec::new();
    for file in 0..FILES {
        let contents = std::fs::read(ws.join(format!("f{file}"))).unwrap();
        let version = version_of(file, &contents).unwrap_or_else(|| {
            panic!(
                "f{file} holds no single version ({} bytes, starts {:?})",
                contents.len(),
                String::from_utf8_lossy(&contents[..contents.len().min(40)])
            )
        });
        assert!(version <= issued[file].load(Ordering::SeqCst));
        versions.push(version);
    }
    assert!(versions.iter().any(|&v| v > 0), "no overwrite landed");

    // A new server on the same root serves the files as they are, and takes new writes.
    let server = ServerProcess::start(&ws).await;
    let fs = connect(&server.url).await;
    for (file, &version) in versions.iter().enumerate() {
        let path = abs(&ws.join(format!("f{file}")));
        assert_eq!(
            fs.read_file(&path).await.unwrap(),
            version_contents(file, version)
        );
        let next = version_contents(file, version + 1);
        fs.write_file(&path, next.clone()).await.unwrap();
        assert_eq!(fs.read_file(&path).await.unwrap(), next);
    }
    server.stop().await;
}

/// File descriptors of process `pid` that point at a deleted file under `dir`: an unfinished
/// O_TMPFILE temporary file is one.
fn deleted_files_open_under(pid: u32, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.starts_with(&prefix) && target.ends_with(" (deleted)"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_upload_leaves_the_old_file_and_no_temporary() {
    let (_dir, ws) = workspace();
    let destination = ws.join("dest.bin");
    std::fs::write(&destination, b"old contents").unwrap();
    let (server, mut stderr) = ServerProcess::start_with_stderr(&[
        "--root".as_ref(),
        ws.as_os_str(),
        "--audit-log".as_ref(),
        "-".as_ref(),
    ])
    .await;

    let mut peer = RawPeer::ready(&server.url).await;
    let size = 4 * DATA_CHUNK_BYTES as u64;
    peer.send(json!({"id": 1, "method": "capfs/writeFileStream",
                     "params": {"path": destination, "streamId": 7, "size": size}}))
        .await;
    // Half of the data, then the socket goes away without a close frame.
    for _ in 0..2 {
        let mut frame = data_frame_header(7).to_vec();
        frame.extend(std::iter::repeat_n(b'N', DATA_CHUNK_BYTES));
        peer.ws.send(WsMessage::binary(frame)).await.unwrap();
    }
    let server_side_temporaries_before = deleted_files_open_under(server.pid(), &ws);
    drop(peer);

    // The server notices: the upload ends, and its audit line says how.
    let line = tokio::time::timeout(WAIT, async {
        loop {
            let line = stderr.recv().await.expect("the server is still running");
            if line.contains("capfs/writeFileStream") {
                return serde_json::from_str::<Value>(&line).unwrap();
            }
        }
    })
    .await
    .expect("the upload was given up in time");
    assert_ne!(line["outcome"], "ok", "{line}");
    assert_eq!(line["paths"], json!([destination]));

    assert_eq!(std::fs::read(&destination).unwrap(), b"old contents");
    assert_eq!(names_in(&ws), BTreeSet::from(["dest.bin".to_string()]));
    assert_eq!(
        deleted_files_open_under(server.pid(), &ws),
        Vec::<String>::new(),
        "the temporary file was closed (open before the disconnect: {server_side_temporaries_before:?})"
    );
    let fs = connect(&server.url).await;
    assert_eq!(
        fs.read_file(&abs(&destination)).await.unwrap(),
        b"old contents"
    );
    drop(fs);
    server.stop().await;
}
