//! How the client is configured and reaches a server: flags and environment, completions and
//! the man page, `--remote-command`, `wss://` through a TLS proxy, the progress display and the
//! capfs extensions on the wire.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_win_over_the_environment_and_serve_help_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    fs::write(ws.join("a"), "a").unwrap();
    // An exported CAPFS_REMOTE does not break `capfs serve --root X`.
    let mut serve = client()
        .args([
            "serve",
            "--read-limit",
            "1G",
            "--max-message-bytes",
            "16M",
            "--root",
        ])
        .arg(&ws)
        .env("CAPFS_REMOTE", "ws://127.0.0.1:1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("ws://127.0.0.1:"), "{line:?}");
    // A flag wins over the environment for the client too.
    let out = client()
        .args(["--remote", line.trim(), "cat"])
        .arg(ws.join("a"))
        .env("CAPFS_REMOTE", "ws://127.0.0.1:1")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a", "{}", describe(&out));
    let out = client()
        .args(["--root"])
        .arg(&ws)
        .args(["cat", "a"])
        .env("CAPFS_REMOTE", "ws://127.0.0.1:1")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a", "{}", describe(&out));
    // The environment is used when no flag is given.
    let out = client()
        .args(["cat"])
        .arg(ws.join("a"))
        .env("CAPFS_REMOTE", line.trim())
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a", "{}", describe(&out));
    let _ = serve.kill();
    let _ = serve.wait();

    let help = client().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--listen") && help.contains("--read-limit"),
        "{help}"
    );
    assert!(
        !help.contains("--remote") && !help.contains("--cd"),
        "{help}"
    );
    let get_help = client().args(["get", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&get_help.stdout).contains("SOURCE... DEST"));
    let bad = client()
        .args(["serve", "--root", "/", "--read-limit", "1Q"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_man_page_and_verbose_calls() {
    for shell in ["bash", "zsh", "fish"] {
        let out = client().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("capfs") && script.contains("roots"),
            "{shell}"
        );
    }
    let man = client().arg("man").output().unwrap();
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(man.contains(".TH capfs") && man.contains("serve"), "{man}");

    let env = Env::new().await;
    let out = env
        .command()
        .args(["-v", "stat", &env.ws("")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fs/getMetadata") && stderr.contains("ms="),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_command_times_out_and_its_whole_process_group_ends() {
    // A command that never speaks: the connect timeout ends the wait.
    let out = client()
        .args([
            "--connect-timeout",
            "300ms",
            "--remote-command",
            "sleep 100",
            "ls",
            "/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out"));

    // `--listen stdio` forgotten: a server in the background of `sh`, which only `sh` knew.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let command = format!(
        "'{BIN}' serve --root '{}' >/dev/null 2>&1 & echo $! > '{}'; wait",
        dir.path().display(),
        pid_file.display()
    );
    let out = client()
        .args([
            "--connect-timeout",
            "2s",
            "--remote-command",
            &command,
            "ls",
            "/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let pid: i32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Gone, or a zombie nobody has reaped yet: either way no longer listening.
    wait_for("the orphaned server to end", || {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
        }
    });
}

/// A `wss://` URL of a TLS proxy in front of `env`'s server, and the file (in `env.local`) of
/// the certificate authority that signed the proxy's certificate.
pub(super) async fn wss_in_front(
    env: &Env,
) -> (String, std::path::PathBuf, tokio::task::JoinHandle<()>) {
    let (port, ca_pem, proxy) = tls_proxy(&env.server.url).await;
    let ca_file = env.local.join("ca.pem");
    fs::write(&ca_file, ca_pem).unwrap();
    (format!("wss://127.0.0.1:{port}"), ca_file, proxy)
}

/// A TLS-terminating proxy in front of `upstream` (a `capfs serve` URL) on 127.0.0.1 port 0,
/// with a certificate for 127.0.0.1 from a new certificate authority. Returns the proxy's
/// port and the authority's certificate (PEM).
async fn tls_proxy(upstream: &str) -> (u16, String, tokio::task::JoinHandle<()>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        tokio_rustls::rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = upstream.trim_start_matches("ws://").to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to proxy.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut plain = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (port, ca.pem(), task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_works_through_a_tls_terminating_proxy() {
    let env = Env::new().await;
    fs::write(env.ws.join("a"), "through tls").unwrap();
    let (url, ca_file, proxy) = wss_in_front(&env).await;
    let out = client()
        .args([
            "--remote",
            &url,
            "--ca-file",
            ca_file.to_str().unwrap(),
            "cat",
        ])
        .arg(env.ws.join("a"))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"through tls", "{}", describe(&out));
    // A put large enough for data frames: over TLS they go through tungstenite, never past it
    // into the TCP socket under the TLS layer.
    let big: Vec<u8> = (0..(3 << 20) + 5).map(|i: u32| (i % 251) as u8).collect();
    fs::write(env.local.join("big"), &big).unwrap();
    let out = client()
        .args(["--remote", &url, "--ca-file", ca_file.to_str().unwrap()])
        .args(["put", "-q", env.local.join("big").to_str().unwrap()])
        .arg(env.ws.join("big"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(fs::read(env.ws.join("big")).unwrap() == big, "put over wss");
    // The platform's roots alone do not know this authority: a connection failure.
    let out = client()
        .args(["--remote", &url, "cat"])
        .arg(env.ws.join("a"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("certificate"),
        "{}",
        describe(&out)
    );
    proxy.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_display_shows_on_a_terminal_only_and_q_silences_it() {
    let env = Env::new().await;
    let local = env.local.join("big");
    fs::write(&local, pattern(8 << 20, 5)).unwrap();
    // `script` gives the client a terminal (a pty) and copies what it draws to our stdout.
    let on_tty = |quiet: bool| {
        let command = format!(
            "'{BIN}' --remote {} put {} '{}' '{}'",
            env.server.url,
            if quiet { "-q" } else { "" },
            local.display(),
            env.ws("big")
        );
        let out = Command::new("script")
            .args(["-qefc", &command, "/dev/null"])
            .env_remove("CAPFS_REMOTE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let drawn = on_tty(false);
    assert!(
        drawn.contains("0/1 files") && drawn.contains(" eta "),
        "{drawn:?}"
    );
    assert!(
        drawn.contains("MiB/s") && drawn.contains("/8.00 MiB"),
        "{drawn:?}"
    );
    assert!(drawn.contains("put 1 file, 8.00 MiB in "), "{drawn:?}");
    assert_eq!(on_tty(true), "");
    // Not a terminal: only the summary line.
    let out = env.run(&["put", local.to_str().unwrap(), &env.ws("big")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("put 1 file, 8.00 MiB in ") && stderr.lines().count() == 1);
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wire_carries_modes_times_roots_and_links_as_capfs_extensions() {
    use serde_json::json;
    let env = Env::new().await;
    let mut peer = crate::serve::RawPeer::connect(&env.server.url).await;
    let init = peer
        .request("initialize", json!({"clientName": "raw"}))
        .await;
    assert_eq!(
        init["result"]["capfs"]["roots"],
        json!([{"path": env.ws.to_str().unwrap(), "access": "read-write"}]),
        "{init}"
    );
    peer.send(json!({"method": "initialized"})).await;
    // fs/writeFile with the capfs params: the mode (never setuid) and the time are applied.
    for (mode, expected) in [(0o750, 0o750), (0o4755, 0o755)] {
        let reply = peer
            .request(
                "fs/writeFile",
                json!({"path": env.ws("w"), "dataBase64": "aGk=", "mode": mode,
                       "modifiedAtMs": 1_000_000_000_123i64}),
            )
            .await;
        assert_eq!(reply["result"], json!({}), "{reply}");
        assert_eq!(mode_of(env.ws.join("w")), expected);
        let modified = fs::metadata(env.ws.join("w")).unwrap().modified().unwrap();
        assert_eq!(
            modified,
            std::time::UNIX_EPOCH + Duration::from_millis(1_000_000_000_123)
        );
        let meta = peer
            .request("fs/getMetadata", json!({"path": env.ws("w")}))
            .await;
        assert_eq!(meta["result"]["mode"], expected, "{meta}");
    }
    // Without them, an existing file keeps its bits.
    peer.request(
        "fs/writeFile",
        json!({"path": env.ws("w"), "dataBase64": "aGk="}),
    )
    .await;
    assert_eq!(mode_of(env.ws.join("w")), 0o755);
    // Links: created with their text as given, read back without being followed.
    let made = peer
        .request(
            "capfs/createSymlink",
            json!({"path": env.ws("l"), "target": "/etc/passwd"}),
        )
        .await;
    assert_eq!(made["result"], json!({}), "{made}");
    let text = peer
        .request("capfs/readLink", json!({"path": env.ws("l")}))
        .await;
    assert_eq!(text["result"]["target"], "/etc/passwd", "{text}");
    let through = peer
        .request("fs/readFile", json!({"path": env.ws("l")}))
        .await;
    assert_eq!(
        through["error"]["data"]["kind"], "PermissionDenied",
        "{through}"
    );
    let not_a_link = peer
        .request("capfs/readLink", json!({"path": env.ws("w")}))
        .await;
    assert_eq!(
        not_a_link["error"]["data"]["kind"], "InvalidInput",
        "{not_a_link}"
    );
}
