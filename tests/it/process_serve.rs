//! The process methods through the real binary, `capfs serve --exec` with the kernel-confined
//! local implementation: a shell command trying to leave its root, the server's own
//! environment kept from it, a terminal written to and resized, and `-32601` without `--exec`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::codex_protocol::uri;
use crate::process_wire::{Peer, until_closed};
use crate::serve::{RawPeer, ServerProcess, error_of};

/// A directory the unprivileged user can reach: `ws/` (writable by it) and `outside/` with a
/// canary it could read but for the confinement.
pub(crate) fn tree() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(outside.join("canary"), b"canary contents").unwrap();
    (
        dir,
        ws.canonicalize().unwrap(),
        outside.canonicalize().unwrap(),
    )
}

pub(crate) async fn exec_server(ws: &Path) -> ServerProcess {
    let args = [
        "--root".as_ref(),
        ws.as_os_str(),
        "--exec".as_ref(),
        "--exec-user".as_ref(),
        "65534".as_ref(),
    ];
    ServerProcess::start_with(&args, &[("SERVER_SECRET", "leak-me-not")]).await
}

fn start(ws: &Path, id: &str, script: &str, tty: bool) -> Value {
    json!({
        "processId": id, "argv": ["sh", "-c", script], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "all", "ignoreDefaultExcludes": false, "exclude": [],
            "set": {}, "includeOnly": []},
        "tty": tty, "pipeStdin": false, "arg0": null,
    })
}

#[tokio::test]
async fn a_shell_command_cannot_leave_its_root_nor_see_the_servers_environment() {
    let (_dir, ws, outside) = tree();
    let server = exec_server(&ws).await;
    let mut peer = Peer::ready(&server.url).await;
    let info = peer.request("environment/info", json!({})).await;
    assert_eq!(info["result"]["processes"]["served"], true, "{info}");
    let script = "cat ../outside/canary; echo pwned > ../outside/canary; \
                  echo new > ../outside/new; (cd .. && ls); env; echo inside > mine";
    let reply = peer
        .request("process/start", start(&ws, "esc", script, false))
        .await;
    assert_eq!(reply["result"]["sandboxType"], "linuxSeccomp", "{reply}");
    let told = until_closed(&mut peer, "esc").await;
    let stdout = String::from_utf8_lossy(&told.stdout);
    assert!(!stdout.contains("canary contents"), "{stdout}");
    assert!(
        !stdout.contains("leak-me-not"),
        "the server's environment leaked: {stdout}"
    );
    assert!(stdout.contains("PATH=/usr/local/sbin:"), "{stdout}");
    assert_eq!(
        std::fs::read(outside.join("canary")).unwrap(),
        b"canary contents"
    );
    assert!(!outside.join("new").exists());
    assert_eq!(std::fs::read(ws.join("mine")).unwrap(), b"inside\n");
    server.stop().await;
}

#[tokio::test]
async fn a_terminal_takes_input_and_a_new_size() {
    let (_dir, ws, _outside) = tree();
    let server = exec_server(&ws).await;
    let mut peer = Peer::ready(&server.url).await;
    let script = "stty size; read x; stty size; echo got:$x";
    let reply = peer
        .request("process/start", start(&ws, "t", script, true))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("24 80") {
        let message = peer.next().await.expect("output");
        if message["method"] == "process/output" {
            assert_eq!(message["params"]["stream"], "pty", "{message}");
            seen.extend(
                STANDARD
                    .decode(message["params"]["chunk"].as_str().unwrap())
                    .unwrap(),
            );
        }
    }
    let resize = json!({"processId": "t", "rows": 40, "cols": 100});
    assert_eq!(
        peer.request("capfs/processResize", resize).await["result"],
        json!({})
    );
    let zero = json!({"processId": "t", "rows": 0, "cols": 100});
    assert_eq!(
        error_of(&peer.request("capfs/processResize", zero).await).0,
        -32602
    );
    let write = json!({"processId": "t", "chunk": STANDARD.encode(b"zz\n"), "writeId": "w"});
    assert_eq!(
        peer.request("process/write", write).await["result"]["status"],
        "accepted"
    );
    let told = until_closed(&mut peer, "t").await;
    let all = String::from_utf8_lossy(&told.stdout).into_owned();
    assert!(all.contains("40 100"), "{all}");
    assert!(all.contains("got:zz"), "{all}");
    assert_eq!(told.exit_code, Some(0));
    server.stop().await;
}

#[tokio::test]
async fn without_exec_the_binary_answers_method_not_found() {
    let (_dir, ws, _outside) = tree();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let reply = peer
        .request("process/start", start(&ws, "p", "true", false))
        .await;
    assert_eq!(error_of(&reply).0, -32601, "{reply}");
    server.stop().await;
}

/// As root, `--exec` without a user to run processes as is refused before anything is served,
/// and the refusal names the flag that gives one.
#[test]
fn exec_as_root_without_a_user_is_refused_naming_the_flag() {
    use std::io::Read;
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs as root"
    );
    let (_dir, ws, _outside) = tree();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--listen", "ws://127.0.0.1:0", "--exec", "--root"])
        .arg(&ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A server that starts serving instead never exits: it is ended by its id, and fails.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("capfs serve --exec as root without --exec-user is serving");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success());
    assert!(stderr.contains("--user UID[:GID]"), "{stderr}");
    assert!(stderr.contains("--exec-user UID[:GID]"), "{stderr}");
}
