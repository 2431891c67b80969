//! `get`, `put` and `cat` of single files: pipes, FIFOs, symlinked destinations, atomic
//! replacement, interruptions, modes and times.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_of_ten_mib_through_put_dash_arrives_whole() {
    let env = Env::new().await;
    let data = pattern(10 << 20, 1);
    for source in ["-", "/dev/stdin"] {
        let target = env.ws(&format!("piped{}", source.len()));
        let mut child = env
            .command()
            .args(["put", "-q", source, &target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = {
            let data = data.clone();
            std::thread::spawn(move || {
                // Small writes: the client must not take the first read for the whole input.
                for chunk in data.chunks(4096 + 17) {
                    stdin.write_all(chunk).unwrap();
                }
            })
        };
        let output = child.wait_with_output().unwrap();
        feed.join().unwrap();
        assert!(output.status.success(), "{source}: {}", describe(&output));
        assert_eq!(fs::read(&target).unwrap(), data, "{source}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_to_stdout_fifos_and_symlinks_writes_through_and_replaces_nothing() {
    let env = Env::new().await;
    let data = pattern(300_000, 2);
    fs::write(env.ws.join("f"), &data).unwrap();
    let source = env.ws("f");

    // `-` and /dev/stdout both reach our stdout, a pipe here.
    for destination in ["-", "/dev/stdout"] {
        let before = fs::symlink_metadata(destination)
            .ok()
            .map(|m| m.file_type());
        let out = env.run(&["get", "-q", &source, destination]);
        assert!(out.status.success(), "{destination}: {}", describe(&out));
        assert_eq!(out.stdout, data, "{destination}");
        let after = fs::symlink_metadata(destination)
            .ok()
            .map(|m| m.file_type());
        assert_eq!(before, after, "{destination} changed type");
    }
    assert!(fs::symlink_metadata("/dev/stdout").unwrap().is_symlink());

    // A symlink we made to a file: the target is written, the link stays a link.
    fs::write(env.local.join("target"), "old").unwrap();
    std::os::unix::fs::symlink("target", env.local.join("link")).unwrap();
    env.ok(&["get", &source, &env.local("link")]);
    assert!(
        fs::symlink_metadata(env.local.join("link"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(fs::read(env.local.join("target")).unwrap(), data);

    // A FIFO: written in place (a reader gets the bytes), still a FIFO afterwards.
    let fifo = env.local.join("fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            fs::File::open(fifo).unwrap().read_to_end(&mut got).unwrap();
            got
        })
    };
    env.ok(&["get", &source, fifo.to_str().unwrap()]);
    assert_eq!(reader.join().unwrap(), data);
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A character device is written in place too.
    env.ok(&["get", &source, "/dev/null"]);
    assert!(
        fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );

    // Nothing but what we made is left in the directory: no temporary files.
    assert_eq!(names_in(&env.local), ["fifo", "link", "target"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regular_destination_is_replaced_atomically_and_a_failure_leaves_it_alone() {
    let env = Env::new().await;
    fs::write(env.ws.join("new"), "new contents").unwrap();
    let destination = env.local.join("dest");
    fs::write(&destination, "old contents").unwrap();
    let before = fs::metadata(&destination).unwrap().ino();
    env.ok(&["get", &env.ws("new"), destination.to_str().unwrap()]);
    assert_eq!(fs::read_to_string(&destination).unwrap(), "new contents");
    // A new inode: the file was renamed over, never truncated in place.
    assert_ne!(fs::metadata(&destination).unwrap().ino(), before);

    let out = env.run(&["get", &env.ws("missing"), destination.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_eq!(fs::read_to_string(&destination).unwrap(), "new contents");
    assert_eq!(names_in(&env.local), ["dest"]);
}

/// A server that answers the handshake and `getMetadata`, then starts a streamed read and
/// never finishes it: a `get` from it is stuck mid-transfer until it is interrupted.
async fn stalling_server() -> (String, tokio::task::JoinHandle<()>) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let mut held = Vec::new();
        while let Some(Ok(frame)) = ws.next().await {
            let Message::Text(text) = frame else { continue };
            let request: serde_json::Value = serde_json::from_str(&text).unwrap();
            let id = request["id"].clone();
            let result = match request["method"].as_str().unwrap_or("") {
                "initialize" => {
                    serde_json::json!({"capfs": {"version": "0", "maxMessageBytes": 1 << 20,
                    "dataFrames": true, "roots": [{"path": "/ws", "access": "read-write"}]}})
                }
                "fs/getMetadata" => serde_json::json!({"isDirectory": false, "isFile": true,
                    "size": 1 << 20, "mode": 420}),
                "capfs/readFileStream" => {
                    let stream = request["params"]["streamId"].as_u64().unwrap();
                    let mut frame = vec![0u8];
                    frame.extend_from_slice(&stream.to_be_bytes());
                    frame.extend_from_slice(&[7u8; 1000]);
                    ws.send(Message::Binary(frame.into())).await.unwrap();
                    held.push(id);
                    continue;
                }
                _ => continue,
            };
            if !id.is_null() {
                let reply = serde_json::json!({"id": id, "result": result});
                ws.send(Message::text(reply.to_string())).await.unwrap();
            }
        }
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_get_leaves_no_temporary_file() {
    for signal in [rustix::process::Signal::TERM, rustix::process::Signal::INT] {
        let (url, server) = stalling_server().await;
        let dir = tempfile::tempdir().unwrap();
        let destination = dir.path().join("dest");
        let mut child = client()
            .args(["--remote", &url, "get", "-q", "/ws/f"])
            .arg(&destination)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The transfer is under way once its temporary file exists.
        wait_for("the temporary file", || !names_in(dir.path()).is_empty());
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{signal:?}");
        assert_eq!(names_in(dir.path()), Vec::<String>::new(), "{signal:?}");
        server.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_travel_both_ways_and_p_keeps_mtimes() {
    let env = Env::new().await;
    let script = env.local.join("run.sh");
    fs::write(&script, "#!/bin/sh\necho ok\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    env.ok(&["put", script.to_str().unwrap(), &env.ws("run.sh")]);
    assert_eq!(mode_of(env.ws.join("run.sh")), 0o755);
    env.ok(&["get", &env.ws("run.sh"), &env.local("back.sh")]);
    assert_eq!(mode_of(env.local.join("back.sh")), 0o755);
    let ran = Command::new(env.local.join("back.sh")).output().unwrap();
    assert_eq!(ran.stdout, b"ok\n");

    // A 0600 file stays private on the way out.
    fs::write(env.ws.join("secret"), "s").unwrap();
    fs::set_permissions(env.ws.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    env.ok(&["get", &env.ws("secret"), &env.local("secret")]);
    assert_eq!(mode_of(env.local.join("secret")), 0o600);

    // setuid and setgid never travel.
    fs::set_permissions(&script, fs::Permissions::from_mode(0o6755)).unwrap();
    env.ok(&["put", script.to_str().unwrap(), &env.ws("suid.sh")]);
    assert_eq!(mode_of(env.ws.join("suid.sh")), 0o755);

    // Without -p the time is the write's; with -p it is the source's, both ways.
    let old = fs::File::options().write(true).open(&script).unwrap();
    let past = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    old.set_modified(past).unwrap();
    drop(old);
    env.ok(&["put", script.to_str().unwrap(), &env.ws("fresh.sh")]);
    assert_ne!(
        fs::metadata(env.ws.join("fresh.sh"))
            .unwrap()
            .modified()
            .unwrap(),
        past
    );
    env.ok(&["put", "-p", script.to_str().unwrap(), &env.ws("kept.sh")]);
    assert_eq!(
        fs::metadata(env.ws.join("kept.sh"))
            .unwrap()
            .modified()
            .unwrap(),
        past
    );
    env.ok(&["get", "-p", &env.ws("kept.sh"), &env.local("kept.sh")]);
    assert_eq!(
        fs::metadata(env.local.join("kept.sh"))
            .unwrap()
            .modified()
            .unwrap(),
        past
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_goes_away_ends_cat_quietly_and_a_lost_server_is_blamed() {
    let env = Env::new().await;
    fs::write(env.ws.join("big"), pattern(4 << 20, 9)).unwrap();
    // `capfs cat big | head -c 10`: the pipe closes early.
    let mut cat = env
        .command()
        .args(["cat", &env.ws("big")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    cat.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = cat.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", describe(&out));
    assert!(out.stderr.is_empty(), "{}", describe(&out));

    // The server goes away mid-transfer: the remote side is named, with the connection status.
    let (url, server) = stalling_server().await;
    let dir = tempfile::tempdir().unwrap();
    let child = client()
        .args(["--remote", &url, "get", "-q", "/ws/f"])
        .arg(dir.path().join("dest"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the temporary file", || !names_in(dir.path()).is_empty());
    server.abort();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "capfs: cannot read '/ws/f': connection to the capfs server was lost\n"
    );
    assert_eq!(names_in(dir.path()), Vec::<String>::new());
}
