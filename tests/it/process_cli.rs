//! `capfs exec` and [`RemoteProcesses`](capfs_wire::RemoteProcesses) against `capfs serve --exec`:
//! input streamed, output passed through, the command's exit status (128 + signal), errors
//! escaped, events in order through the library client, and a narrowing sent as the request's
//! policy holding.

use std::process::Stdio;

use capfs::process::{ExecutorProcesses, OutputStream, ProcessEvent, ProcessRequest};
use capfs::{AbsolutePathBuf, Access};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use tokio::io::AsyncWriteExt;

use crate::process_serve::{exec_server, tree};

async fn exec(url: &str, stdin: &[u8], command: &[&str]) -> (i32, Vec<u8>, Vec<u8>) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["--remote", url, "exec", "--"])
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(crate::serve::WAIT, child.wait_with_output())
        .await
        .expect("capfs exec ended in time")
        .unwrap();
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

#[tokio::test]
async fn capfs_exec_streams_input_and_returns_the_commands_status() {
    let (_dir, ws, _outside) = tree();
    let server = exec_server(&ws).await;
    let script = "read x; echo got:$x; echo oops >&2; exit 7";
    let (code, stdout, stderr) = exec(&server.url, b"hello\n", &["sh", "-c", script]).await;
    assert_eq!(
        (code, stdout.as_slice(), stderr.as_slice()),
        (7, &b"got:hello\n"[..], &b"oops\n"[..])
    );
    let (code, stdout, _) = exec(&server.url, b"abc", &["wc", "-c"]).await;
    assert_eq!((code, String::from_utf8_lossy(&stdout).trim()), (0, "3"));
    let (code, _, _) = exec(&server.url, b"", &["sh", "-c", "kill -INT $$"]).await;
    assert_eq!(code, 128 + 2);
    // A name the terminal would act on comes back in the error escaped.
    let (code, _, stderr) = exec(&server.url, b"", &["/no/\x1b[31mred"]).await;
    assert_eq!(code, 3, "{}", String::from_utf8_lossy(&stderr));
    assert!(!stderr.contains(&0x1b), "{stderr:?}");
    server.stop().await;
}

async fn run(processes: &dyn ExecutorProcesses, request: ProcessRequest) -> (Vec<u8>, i32) {
    let mut started = processes.start(request).await.unwrap();
    let (mut stdout, mut code, mut seen_exit) = (Vec::new(), None, false);
    while let Some(event) = started.events.recv().await {
        match event {
            ProcessEvent::Output {
                stream: OutputStream::Stdout,
                bytes,
            } => {
                assert!(code.is_none() || seen_exit);
                stdout.extend(bytes);
            }
            ProcessEvent::Output { .. } => {}
            ProcessEvent::Exited(exit) => {
                seen_exit = true;
                code = Some(exit.code);
            }
            ProcessEvent::Closed => break,
            other => panic!("an event this test does not know: {other:?}"),
        }
    }
    (stdout, code.expect("an exit before the close"))
}

#[tokio::test]
async fn remote_processes_run_on_the_connection_and_a_narrowing_holds() {
    let (_dir, ws, _outside) = tree();
    let server = exec_server(&ws).await;
    let remote = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let processes = remote.processes().expect("the server serves processes");
    assert!(matches!(
        processes.confinement(),
        capfs::process::Confinement::Enforced(_)
    ));
    let cwd = AbsolutePathBuf::new(&ws).unwrap();
    let argv = |script: &str| vec!["sh".to_string(), "-c".to_string(), script.to_string()];
    let mut request = ProcessRequest::new(argv("echo a > one && echo wrote"), cwd.clone());
    request.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    assert_eq!(
        run(&processes, request.clone()).await,
        (b"wrote\n".to_vec(), 0)
    );
    assert!(ws.join("one").exists());
    request.argv = argv("echo b > two && echo wrote");
    request.narrowing = Some(vec![(cwd.clone(), Access::ReadOnly)]);
    let (stdout, code) = run(&processes, request).await;
    assert_ne!(code, 0, "a read-only narrowing let it write: {stdout:?}");
    assert!(!ws.join("two").exists());
    drop(remote);
    server.stop().await;
}

/// `capfs exec` on local roots: as root it needs `--user`, and says so; with one, the command
/// runs as that user, confined (the host's `/etc/shadow` unreadable), and its status returns.
#[tokio::test]
async fn capfs_exec_on_local_roots_runs_as_the_user_it_is_given() {
    let (_dir, ws, _outside) = tree();
    let local = |user: Option<&str>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"));
        command.arg("--root").arg(&ws).arg("exec");
        if let Some(user) = user {
            command.args(["--user", user]);
        }
        command
            .args(["--", "sh", "-c", "id -u; cat /etc/shadow; exit 4"])
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    };
    let refused = tokio::time::timeout(crate::serve::WAIT, local(None).output())
        .await
        .expect("capfs exec ended in time")
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--user UID[:GID]"), "{stderr}");
    let ran = tokio::time::timeout(crate::serve::WAIT, local(Some("65534")).output())
        .await
        .expect("capfs exec ended in time")
        .unwrap();
    assert_eq!(ran.status.code(), Some(4));
    assert_eq!(ran.stdout, b"65534\n");
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
}
