//! `GET /healthz`, `/readyz` and `/metrics`: open probes that say nothing of the roots, and
//! metrics behind the token with labels from fixed sets.

use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

use super::{Fleet, get, text, workspace};

const TOKEN: &str = "fleet-t0ken-93ab";

#[tokio::test]
async fn probes_are_open_and_bare_and_metrics_need_the_token() {
    let (dir, ws) = workspace();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let args = ["--root", &text(&ws), "--token-file", &text(&token_file)];
    let server = Fleet::start(&args, &[], false).await;
    let options = RemoteOptions::default().with_token(Some(TOKEN.into()));
    let fs = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap();
    let denied = fs
        .read_file(&AbsolutePathBuf::new("/etc/hostname").unwrap())
        .await
        .unwrap_err();
    assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
    let written = AbsolutePathBuf::new(ws.join("f")).unwrap();
    fs.write_file(&written, b"12345".to_vec()).await.unwrap();
    assert_eq!(fs.read_file(&written).await.unwrap(), b"12345");

    let address = server.address();
    let health = get(address, "/healthz", "").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    assert!(health.ends_with("\r\n\r\nok\n"), "{health}");
    let ready = get(address, "/readyz", "").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    assert!(ready.ends_with("\r\n\r\nready\n"), "{ready}");

    for refused in [
        get(address, "/metrics", "").await,
        get(address, "/metrics", "Authorization: Bearer wrong\r\n").await,
        get(
            address,
            "/metrics",
            &format!("Authorization: Basic {TOKEN}\r\n"),
        )
        .await,
    ] {
        assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
        assert!(!refused.contains("capfs_"), "{refused}");
    }
    let metrics = get(
        address,
        "/metrics",
        &format!("authorization: bearer {TOKEN}\r\n"),
    )
    .await;
    assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
    for line in [
        // A small file is read by one range.
        "capfs_requests_total{method=\"capfs/readFileRange\",outcome=\"PermissionDenied\"} 1",
        "capfs_requests_total{method=\"capfs/readFileRange\",outcome=\"ok\"} 1",
        "capfs_requests_total{method=\"fs/writeFile\",outcome=\"ok\"} 1",
        "capfs_requests_total{method=\"initialize\",outcome=\"ok\"} 1",
        "capfs_denials_total{reason=\"outside_roots\"} 1",
        "capfs_file_bytes_total{direction=\"in\"} 5",
        "capfs_file_bytes_total{direction=\"out\"} 5",
        "capfs_connections_open 1",
        "capfs_processes_running 0",
        "capfs_audit_write_failures_total 0",
        "# TYPE capfs_process_start_seconds histogram",
        "# TYPE capfs_outgoing_bytes_in_use gauge",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    // Nothing a client chose, no root, no token.
    for answer in [&health, &ready, &metrics] {
        assert!(!answer.contains(TOKEN), "{answer}");
        assert!(!answer.contains(&text(&ws)), "{answer}");
        assert!(!answer.contains("/etc/hostname"), "{answer}");
    }
    drop(fs);
    let mut server = server;
    server.signal("TERM");
    assert!(server.exited().await.success());
}

#[tokio::test]
async fn an_admin_address_takes_the_probes_off_the_listener() {
    let (_dir, ws) = workspace();
    let args = ["--root", &text(&ws), "--admin-listen", "http://127.0.0.1:0"];
    let mut server = Fleet::start(&args, &[], true).await;
    let admin = server.admin.clone().unwrap();
    let admin = admin.strip_prefix("http://").unwrap();
    for (path, answer) in [
        ("/healthz", "ok\n"),
        ("/readyz", "ready\n"),
        ("/metrics", "# EOF\n"),
    ] {
        let got = get(admin, path, "").await;
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {got}");
        assert!(got.ends_with(answer), "{path}: {got}");
        let beside = get(server.address(), path, "").await;
        assert!(
            !beside.contains("200 OK"),
            "{path} on the listener: {beside}"
        );
    }
    let other = get(admin, "/other", "").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    // The WebSocket listener still serves.
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    assert!(
        fs.get_metadata(&AbsolutePathBuf::new(&ws).unwrap())
            .await
            .unwrap()
            .is_directory
    );
    drop(fs);
    server.signal("TERM");
    assert!(server.exited().await.success());
}

#[tokio::test]
async fn an_admin_address_off_loopback_needs_a_token() {
    let (_dir, ws) = workspace();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args([
            "serve",
            "--root",
            &text(&ws),
            "--admin-listen",
            "http://0.0.0.0:0",
        ])
        .env_remove("CAPFS_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--admin-listen"), "{stderr}");
}

#[test]
fn serve_help_documents_the_fleet_flags() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--admin-listen <URL>",
        "--shutdown-timeout <DURATION>",
        "[alias: --drain-timeout]",
        "--process-grace <DURATION>",
        "GET /healthz, /readyz and /metrics",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[tokio::test]
async fn a_stdio_server_refuses_an_admin_address() {
    let (_dir, ws) = workspace();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--listen", "stdio", "--root", &text(&ws)])
        .args(["--admin-listen", "http://127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--admin-listen"), "{stderr}");
}

#[tokio::test]
async fn readyz_turns_503_when_a_root_is_removed_or_replaced() {
    let (_dir, ws) = workspace();
    let mut server = Fleet::start(&["--root", &text(&ws)], &[], false).await;
    let address = server.address().to_string();
    let ready = get(&address, "/readyz", "").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    // The server's handle still reaches the removed directory: only its path says it is gone.
    std::fs::remove_dir(&ws).unwrap();
    let removed = get(&address, "/readyz", "").await;
    assert!(removed.starts_with("HTTP/1.1 503"), "{removed}");
    assert!(removed.ends_with("\r\n\r\nnot ready\n"), "{removed}");
    assert!(!removed.contains(&text(&ws)), "{removed}");
    // Another directory of the same name is not the one served.
    std::fs::create_dir(&ws).unwrap();
    let replaced = get(&address, "/readyz", "").await;
    assert!(replaced.starts_with("HTTP/1.1 503"), "{replaced}");
    let health = get(&address, "/healthz", "").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    server.signal("TERM");
    assert!(server.exited().await.success());
}
