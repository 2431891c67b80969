//! The stdio transport and `--remote-command`.

use super::*;
use test_case::test_case;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_every_method_with_data_frames() {
    let (_dir, ws) = workspace();
    let fs = RemoteFileSystem::connect_command(&stdio_command(&ws), RemoteOptions::default())
        .await
        .unwrap();
    assert!(fs.supports_data_frames());
    let p = |name: &str| abs(&ws.join(name));

    fs.create_directory(&p("d"), Default::default())
        .await
        .unwrap();
    fs.write_file(&p("d/small.txt"), b"hello".to_vec())
        .await
        .unwrap();
    // Large enough for data frames (several 256 KiB chunks) both ways.
    let big = pattern(3, 3 * 1024 * 1024 + 17);
    fs.write_file(&p("d/big.bin"), big.clone()).await.unwrap();
    assert_eq!(std::fs::read(ws.join("d/big.bin")).unwrap(), big);
    assert_eq!(fs.read_file(&p("d/big.bin")).await.unwrap(), big);
    assert_eq!(fs.read_file(&p("d/small.txt")).await.unwrap(), b"hello");
    assert_eq!(
        fs.get_metadata(&p("d/big.bin")).await.unwrap().size,
        big.len() as u64
    );
    fs.copy(
        &p("d"),
        &p("e"),
        CopyOptions::default().with_recursive(true),
    )
    .await
    .unwrap();
    fs.rename(
        &p("e/small.txt"),
        &p("e/renamed.txt"),
        RenameOptions::default(),
    )
    .await
    .unwrap();
    let mut names: Vec<String> = fs
        .read_directory(&p("e"))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file_name)
        .collect();
    names.sort();
    assert_eq!(names, ["big.bin", "renamed.txt"]);
    fs.remove(&p("e"), RemoveOptions::default()).await.unwrap();
    assert!(!ws.join("e").exists());

    let escape = fs
        .read_file(&AbsolutePathBuf::new("/etc/passwd").unwrap())
        .await
        .unwrap_err();
    assert_eq!(escape.kind(), ErrorKind::PermissionDenied, "{escape}");
    let missing = fs.read_file(&p("missing")).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
}

#[tokio::test]
async fn a_command_that_is_not_a_server_fails_to_connect() {
    let err = RemoteFileSystem::connect_command("exit 3", RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    assert!(err.to_string().contains("`exit 3`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_dying_mid_call_fails_every_pending_call_promptly() {
    let (dir, ws) = workspace();
    let pid_file = dir.path().join("pid");
    // `exec` keeps the shell's pid, so the pid written is the server's.
    let command = format!("echo $$ > '{}'; {}", pid_file.display(), stdio_command(&ws));
    let fs = Arc::new(
        RemoteFileSystem::connect_command(&command, RemoteOptions::default())
            .await
            .unwrap(),
    );
    let root = abs(&ws);
    let (first_write_tx, mut first_write) = tokio::sync::mpsc::unbounded_channel();
    let mut calls = Vec::new();
    for i in 0..16 {
        let fs = Arc::clone(&fs);
        let path = root.join(format!("f{i}")).unwrap();
        let done = first_write_tx.clone();
        calls.push(tokio::spawn(async move {
            loop {
                // Alternate streamed and single-message writes.
                let size = if i % 2 == 0 { 1 << 20 } else { 1000 };
                match fs.write_file(&path, vec![i as u8; size]).await {
                    Ok(()) => {
                        let _ = done.send(());
                    }
                    Err(e) => return e,
                }
            }
        }));
    }
    tokio::time::timeout(WAIT, first_write.recv())
        .await
        .expect("a write completed in time");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let killed = Instant::now();
    for call in calls {
        let err = tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .expect("a pending call failed within a second of the kill")
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    }
    assert!(killed.elapsed() < Duration::from_secs(1));
    let err = fs.get_metadata(&root).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(fs.is_closed());
}

/// What a test writes to a stdio server's stdin; dropping it ends the stdin.
type Input = Box<dyn AsyncWrite + Send + Unpin>;

/// What a test reads from a stdio server's stdout.
type Output = Box<dyn AsyncRead + Send + Unpin>;

/// A WebSocket endpoint that only sends, onto a child's stdin; dropping it ends the stdin.
type Sender = WebSocketStream<tokio::io::Join<tokio::io::Empty, Input>>;

/// A WebSocket endpoint that only receives, from a child's stdout.
type Receiver = WebSocketStream<tokio::io::Join<Output, tokio::io::Sink>>;

/// What a `capfs serve --listen stdio` child is given as its stdin and stdout.
#[derive(Clone, Copy, Debug)]
enum Channel {
    /// Two pipes, as `kubectl exec` gives.
    Pipes,
    /// Both one end of a Unix socket pair, as sshd and `connect_command` give.
    OneSocket,
    /// Each one end of a socket pair of its own.
    TwoSockets,
}

/// The lines a child writes to its piped stderr.
type StderrLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>;

fn stderr_lines(child: &mut tokio::process::Child) -> StderrLines {
    use tokio::io::AsyncBufReadExt;
    tokio::io::BufReader::new(child.stderr.take().unwrap()).lines()
}

/// Whether a line holding `words` comes within the wait.
async fn says(lines: &mut StderrLines, words: &str) -> bool {
    let found = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(words) {
                return true;
            }
        }
        false
    });
    found.await.unwrap_or(false)
}

/// A socket pair: the test's end (non-blocking, for tokio) and the child's.
fn socket_pair() -> (tokio::net::UnixStream, std::os::unix::net::UnixStream) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    (tokio::net::UnixStream::from_std(ours).unwrap(), theirs)
}

/// Starts `capfs serve --listen stdio` on `ws` over `channel`: the child, its stdin and its
/// stdout.
fn start_stdio_server(ws: &Path, channel: Channel) -> (tokio::process::Child, Input, Output) {
    start_stdio_server_with(ws, channel, |_| {})
}

/// As [`start_stdio_server`], the command changed by `configure` first.
fn start_stdio_server_with(
    ws: &Path,
    channel: Channel,
    configure: impl FnOnce(&mut Command),
) -> (tokio::process::Child, Input, Output) {
    use std::os::fd::OwnedFd;
    use std::process::Stdio;
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--listen", "stdio", "--root"])
        .arg(ws)
        .env("RUST_LOG", "capfs=warn")
        .kill_on_drop(true);
    configure(&mut command);
    match channel {
        Channel::Pipes => {
            command.stdin(Stdio::piped()).stdout(Stdio::piped());
            let mut child = command.spawn().unwrap();
            let stdin = child.stdin.take().unwrap();
            let stdout = child.stdout.take().unwrap();
            (child, Box::new(stdin), Box::new(stdout))
        }
        Channel::OneSocket => {
            let (ours, theirs) = socket_pair();
            let theirs_too = theirs.try_clone().unwrap();
            command
                .stdin(Stdio::from(OwnedFd::from(theirs)))
                .stdout(Stdio::from(OwnedFd::from(theirs_too)));
            let child = command.spawn().unwrap();
            // Dropping the writing half shuts the socket down for writing only.
            let (read, write) = ours.into_split();
            (child, Box::new(write), Box::new(read))
        }
        Channel::TwoSockets => {
            let (input, stdin) = socket_pair();
            let (output, stdout) = socket_pair();
            command
                .stdin(Stdio::from(OwnedFd::from(stdin)))
                .stdout(Stdio::from(OwnedFd::from(stdout)));
            let child = command.spawn().unwrap();
            (child, Box::new(input), Box::new(output))
        }
    }
}

async fn send_json(sender: &mut Sender, value: Value) {
    sender
        .send(WsMessage::text(value.to_string()))
        .await
        .unwrap();
}

async fn next_json(receiver: &mut Receiver) -> Option<Value> {
    loop {
        let frame = tokio::time::timeout(WAIT, receiver.next())
            .await
            .expect("the server answered in time")?;
        match frame.ok()? {
            WsMessage::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
            WsMessage::Close(_) => return None,
            _ => {}
        }
    }
}

#[test_case(Channel::Pipes ; "pipes")]
#[test_case(Channel::OneSocket ; "one socket")]
#[test_case(Channel::TwoSockets ; "two sockets")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_finishes_in_flight_requests_when_stdin_closes_and_exits_zero(channel: Channel) {
    let (_dir, ws) = workspace();
    let (mut child, stdin, stdout) = start_stdio_server(&ws, channel);
    let stdin = tokio::io::join(tokio::io::empty(), stdin);
    let stdout = tokio::io::join(stdout, tokio::io::sink());
    let mut sender = WebSocketStream::from_raw_socket(stdin, Role::Client, None).await;
    let mut receiver = WebSocketStream::from_raw_socket(stdout, Role::Client, None).await;

    send_json(
        &mut sender,
        json!({"id": 1, "method": "initialize", "params": {"clientName": "t"}}),
    )
    .await;
    let reply = next_json(&mut receiver).await.unwrap();
    assert_eq!(
        reply["result"]["capfs"]["dataFrames"],
        json!(true),
        "{reply}"
    );
    send_json(&mut sender, json!({"method": "initialized"})).await;
    let file = ws.join("big.bin");
    let data = pattern(9, 8 << 20);
    send_json(
        &mut sender,
        json!({"id": 2, "method": "fs/writeFile",
               "params": {"path": file, "dataBase64": STANDARD.encode(&data)}}),
    )
    .await;
    send_json(
        &mut sender,
        json!({"id": 3, "method": "fs/getMetadata", "params": {"path": ws}}),
    )
    .await;
    // `send` returned, so every byte is on its way: close stdin with both requests unanswered
    // (or at most answered in part).
    drop(sender);

    let mut answered = HashSet::new();
    while let Some(reply) = next_json(&mut receiver).await {
        assert!(reply.get("result").is_some(), "{reply}");
        answered.insert(reply["id"].as_i64().unwrap());
    }
    assert_eq!(answered, HashSet::from([2, 3]));
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the server exited in time")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::read(&file).unwrap(), data);
}

/// A peer on a stdio server's one socket that asks for 64 replies of 4 MiB and reads none: the
/// replies go out past tungstenite as on TCP, and once the writer has waited on the socket for
/// twice the idle timeout the server says so, closes the connection and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_reads_nothing_on_a_stdio_socket_is_closed() {
    let (_dir, ws) = workspace();
    let big = ws.join("big");
    std::fs::write(&big, vec![7u8; 4 << 20]).unwrap();
    let (mut child, stdin, stdout) = start_stdio_server_with(&ws, Channel::OneSocket, |c| {
        c.args(["--stream-idle-timeout", "500ms"])
            .stderr(std::process::Stdio::piped());
    });
    let mut stderr = stderr_lines(&mut child);
    let io = tokio::io::join(stdout, stdin);
    let mut peer = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    let initialize = json!({"id": 0, "method": "initialize", "params": {"clientName": "t"}});
    peer.send(WsMessage::text(initialize.to_string()))
        .await
        .unwrap();
    let reply = tokio::time::timeout(WAIT, peer.next()).await.unwrap();
    assert!(matches!(reply, Some(Ok(WsMessage::Text(_)))), "{reply:?}");
    let initialized = json!({"method": "initialized"});
    peer.send(WsMessage::text(initialized.to_string()))
        .await
        .unwrap();
    for id in 1..=64 {
        let read = json!({"id": id, "method": "fs/readFile", "params": {"path": big}});
        peer.send(WsMessage::text(read.to_string())).await.unwrap();
    }
    assert!(
        says(&mut stderr, "took nothing queued for it").await,
        "the server never closed the peer"
    );
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the server exited in time")
        .unwrap();
    assert!(status.success(), "{status}");
    drop(peer);
}

/// SIGTERM before the peer has sent anything stops the server at once, with success: it was
/// watched before the server said it serves.
#[test_case(Channel::Pipes ; "pipes")]
#[test_case(Channel::OneSocket ; "one socket")]
#[tokio::test]
async fn a_stdio_server_stops_on_sigterm_before_the_first_byte(channel: Channel) {
    let (_dir, ws) = workspace();
    let (mut child, _stdin, _stdout) = start_stdio_server_with(&ws, channel, |c| {
        c.env("RUST_LOG", "capfs=info")
            .stderr(std::process::Stdio::piped());
    });
    let mut stderr = stderr_lines(&mut child);
    assert!(
        says(&mut stderr, "serving one connection").await,
        "the server never said it serves"
    );
    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the server stopped in time")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// A stdin that is a pipe and a stdout that is a file: neither is made non-blocking, so the
/// replies are written to the file as to any other stdout.
#[test]
fn stdio_answers_into_a_file() {
    use std::io::Write;
    let (dir, ws) = workspace();
    let out = dir.path().join("replies");
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--listen", "stdio", "--root"])
        .arg(&ws)
        .env("RUST_LOG", "capfs=warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let line = json!({"id": 1, "method": "initialize", "params": {"clientName": "codex"}});
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let replies = std::fs::read_to_string(&out).unwrap();
    let reply: Value = serde_json::from_str(replies.trim()).expect("one JSON reply");
    assert_eq!(reply["id"], 1, "{replies}");
    assert!(reply["result"]["sessionId"].is_string(), "{replies}");
}

/// codex's JSON lines over a socket: the server looks at the first byte without taking it.
#[tokio::test]
async fn stdio_speaks_json_lines_on_a_socket() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("a.txt"), "hello").unwrap();
    let (mut child, mut stdin, mut stdout) = start_stdio_server(&ws, Channel::OneSocket);
    let lines = [
        json!({"id": 1, "method": "initialize", "params": {"clientName": "codex"}}),
        json!({"method": "initialized"}),
        json!({"id": 2, "method": "fs/readFile", "params": {"path": ws.join("a.txt")}}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let mut replies = String::new();
    tokio::time::timeout(WAIT, stdout.read_to_string(&mut replies))
        .await
        .expect("the server answered and ended in time")
        .unwrap();
    let replies: Vec<Value> = replies
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON message per line"))
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["result"]["capfs"]["dataFrames"], false);
    assert_eq!(
        replies[1]["result"]["dataBase64"], "aGVsbG8=",
        "{replies:?}"
    );
    let status = tokio::time::timeout(WAIT, child.wait()).await.unwrap();
    assert!(status.unwrap().success());
}

/// A stdio server on pipes lets each hold 1 MiB, where the kernel gives 64 KiB: a streamed
/// transfer then hands over 1 MiB a wake-up.
#[tokio::test]
async fn a_stdio_server_widens_its_pipes() {
    let (_dir, ws) = workspace();
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "stdio", "--root"])
        .arg(&ws)
        .env("RUST_LOG", "capfs=warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let sizes = |stdin: &tokio::process::ChildStdin, stdout: &tokio::process::ChildStdout| {
        (
            rustix::pipe::fcntl_getpipe_size(stdin).unwrap(),
            rustix::pipe::fcntl_getpipe_size(stdout).unwrap(),
        )
    };
    // What the kernel gives a new pipe here, for comparison (the server may already have
    // widened its own by now).
    let (fresh, _) = rustix::pipe::pipe().unwrap();
    let default = rustix::pipe::fcntl_getpipe_size(&fresh).unwrap();
    assert!(default < 1 << 20, "{default}");
    let line = json!({"id": 1, "method": "initialize", "params": {"clientName": "codex"}});
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    // The server reads its first byte after it has widened both.
    let mut first = [0u8; 1];
    let mut stdout = stdout;
    tokio::time::timeout(WAIT, stdout.read_exact(&mut first))
        .await
        .expect("the server answered in time")
        .unwrap();
    assert_eq!(sizes(&stdin, &stdout), (1 << 20, 1 << 20));
}

#[tokio::test]
async fn the_cli_works_through_remote_command() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let command = stdio_command(&ws);
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .arg("--remote-command")
            .arg(&command)
            .args(args)
            .env_remove("CAPFS_REMOTE")
            .output()
            .unwrap()
    };
    let ws_str = ws.to_str().unwrap();
    let ls = run(&["ls", ws_str]);
    assert!(ls.status.success(), "{ls:?}");
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "a.txt\n");
    let cat = run(&["cat", &format!("{ws_str}/a.txt")]);
    assert_eq!(cat.stdout, b"alpha\n");
    // From the environment, with the server's default log level: a stdio server is quiet, and
    // the client's CAPFS_REMOTE_COMMAND does not leak into the local server's arguments.
    let quiet = format!(
        "exec '{BIN}' serve --listen stdio --root '{}' --audit-log /dev/null",
        ws.display()
    );
    let stat = std::process::Command::new(BIN)
        .args(["stat", &format!("{ws_str}/a.txt")])
        .env("CAPFS_REMOTE_COMMAND", &quiet)
        .env_remove("CAPFS_REMOTE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(stat.status.success(), "{stat:?}");
    assert!(
        String::from_utf8_lossy(&stat.stdout).contains("Size: 6 B (6 bytes)"),
        "{stat:?}"
    );
    assert_eq!(String::from_utf8_lossy(&stat.stderr), "");
    let denied = run(&["cat", "/etc/passwd"]);
    assert!(!denied.status.success());
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("capfs: cannot read '/etc/passwd':")
            && stderr.contains("outside every sandbox root"),
        "{stderr}"
    );
}
