//! Who may connect: browser origins, the token, and non-loopback addresses.

use super::*;

#[tokio::test]
async fn browser_origins_are_refused() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let status = handshake_status(&server.url, &[(header::ORIGIN, "https://evil.example")]).await;
    assert_eq!(status, Some(StatusCode::FORBIDDEN));
    assert_eq!(handshake_status(&server.url, &[]).await, None);
}

#[tokio::test]
async fn a_configured_token_is_required() {
    let (dir, ws) = workspace();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--token-file".as_ref(),
            token_file.as_os_str(),
        ],
        &[],
    )
    .await;
    let auth = header::AUTHORIZATION;
    assert_eq!(
        handshake_status(&server.url, &[]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth.clone(), "Bearer wrong")]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth.clone(), "s3cret-token")]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth, "Bearer s3cret-token")]).await,
        None
    );

    let refused = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
    let options = RemoteOptions::default().with_token(Some("s3cret-token".into()));
    let fs = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap();
    let root = AbsolutePathBuf::new(&ws).unwrap();
    assert!(fs.get_metadata(&root).await.unwrap().is_directory);
}

#[tokio::test]
async fn the_token_may_come_from_the_environment() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &["--root".as_ref(), ws.as_os_str()],
        &[("CAPFS_TOKEN", "envtoken")],
    )
    .await;
    assert_eq!(
        handshake_status(&server.url, &[]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(header::AUTHORIZATION, "Bearer envtoken")]).await,
        None
    );
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused_at_start() {
    let (_dir, ws) = workspace();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--listen", "ws://0.0.0.0:0", "--root"])
        .arg(&ws)
        .env_remove("CAPFS_TOKEN")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "printed a URL: {:?}",
        output.stdout
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("capfs: cannot listen on ws://0.0.0.0:0: refusing"),
        "{stderr}"
    );
}
