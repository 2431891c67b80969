//! The handshake budget and deadline, and the bearer scheme.

use super::*;

#[tokio::test]
async fn half_open_handshakes_never_take_the_slots_of_authenticated_clients() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-connections".as_ref(),
            "4".as_ref(),
            "--handshake-timeout".as_ref(),
            "60s".as_ref(),
        ],
        &[("CAPFS_TOKEN", TOKEN)],
    )
    .await;
    // Six peers send half an upgrade request and stop; the server accepts them (in order)
    // before any of the clients below.
    let half = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n";
    let _half_open = silent_peers(&server.url, 6, half).await;
    // Every slot still goes to clients with the right token...
    let mut clients = Vec::new();
    for n in 0..4 {
        let fs = RemoteFileSystem::connect(&server.url, with_token())
            .await
            .unwrap_or_else(|e| panic!("authenticated client {n} refused: {e}"));
        fs.read_directory(&abs(&ws)).await.expect("list");
        clients.push(fs);
    }
    // ...and the connection limit still holds for them.
    let fifth = RemoteFileSystem::connect(&server.url, with_token())
        .await
        .expect_err("a fifth connection is over --max-connections 4");
    assert!(fifth.to_string().contains("503"), "{fifth}");
    // A slot freed by a client that leaves goes to the next one with the token.
    drop(clients.pop());
    let again = connect_eventually(&server.url, with_token()).await;
    again.read_directory(&abs(&ws)).await.expect("list");
    drop(again);
    drop(clients);
    server.stop().await;
}

#[tokio::test]
async fn silent_peers_are_closed_at_the_handshake_deadline() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--handshake-timeout".as_ref(),
            "300ms".as_ref(),
        ],
        &[],
    )
    .await;
    let mut silent = silent_peers(&server.url, 1, b"").await;
    let mut half = silent_peers(&server.url, 1, b"GET / HTTP/1.1\r\n").await;
    assert!(is_closed_by_server(&mut silent[0]).await);
    assert!(is_closed_by_server(&mut half[0]).await);
    server.stop().await;
}

#[tokio::test]
async fn beyond_the_handshake_budget_new_connections_are_closed_at_once() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-handshakes".as_ref(),
            "4".as_ref(),
            "--handshake-timeout".as_ref(),
            "300s".as_ref(),
        ],
        &[],
    )
    .await;
    let budget = silent_peers(&server.url, 4, b"").await;
    let mut over = silent_peers(&server.url, 1, b"").await;
    // The fifth is closed while the four are still waiting for their deadline of 300 s.
    assert!(is_closed_by_server(&mut over[0]).await);
    drop(budget);
    // Once they are gone, a client gets in.
    let fs = connect_eventually(&server.url, RemoteOptions::default()).await;
    fs.read_directory(&abs(&ws)).await.expect("list");
    drop(fs);
    server.stop().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &["--root".as_ref(), ws.as_os_str()],
        &[("CAPFS_TOKEN", TOKEN)],
    )
    .await;
    let connect = |value: String| {
        let mut request = server.url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", HeaderValue::from_str(&value).unwrap());
        tokio_tungstenite::connect_async(request)
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let (ws, _) = connect(format!("{scheme} {TOKEN}"))
            .await
            .unwrap_or_else(|e| panic!("{scheme}: {e}"));
        drop(ws);
    }
    for refused in [
        format!("bearer {TOKEN}x"),
        format!("Basic {TOKEN}"),
        TOKEN.to_string(),
    ] {
        let err = connect(refused.clone()).await.expect_err(&refused);
        assert!(err.to_string().contains("401"), "{refused}: {err}");
    }
    server.stop().await;
}
