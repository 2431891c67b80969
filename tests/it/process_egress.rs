//! `capfs serve --exec` with an egress policy: its flags and file refused at start-up when
//! malformed or combined with the host's network, and a command run through `capfs exec`
//! reaching an allowed name through its proxy, with the connection in the audit log.

use std::process::Stdio;

use crate::process_serve::tree;
use crate::processes::egress_web;
use crate::serve::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_capfs");

/// `capfs serve --exec` with `extra`, expected to refuse to start: its stderr.
fn refused(ws: &std::path::Path, extra: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "ws://127.0.0.1:0",
            "--exec",
            "--user",
            "65534",
            "--root",
        ])
        .arg(ws)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{extra:?} started");
    stderr
}

#[test]
fn malformed_policies_and_egress_beside_the_host_network_are_refused_at_start_up() {
    let (dir, ws, _outside) = tree();
    let err = refused(&ws, &["--exec-allow-host", "a.*.test"]);
    assert!(
        err.contains("--exec-allow-host: host pattern \"a.*.test\""),
        "{err}"
    );
    let err = refused(&ws, &["--exec-deny-host", "10.0.0.1/8"]);
    assert!(err.contains("bits set past its prefix length"), "{err}");
    let err = refused(&ws, &["--exec-resolve", "a.test:443"]);
    assert!(err.contains("--exec-resolve: resolve entry"), "{err}");
    let file = dir.path().join("policy");
    std::fs::write(&file, "# pypi\nallow pypi.org\nallow files.*.org\n").unwrap();
    let err = refused(&ws, &["--exec-network-policy", file.to_str().unwrap()]);
    assert!(
        err.contains("line 3: host pattern \"files.*.org\""),
        "{err}"
    );
    for network in ["all", "loopback"] {
        let err = refused(
            &ws,
            &["--exec-network", network, "--exec-allow-host", "pypi.org"],
        );
        assert!(
            err.contains("not with --exec-network all or loopback"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reaches_an_allowed_name_through_capfs_serve_and_is_audited() {
    let (dir, ws, _outside) = tree();
    let web = egress_web("127.0.0.27", b"served by name\n").await;
    let port = web.addr.port();
    let audit = dir.path().join("audit.log");
    let file = dir.path().join("policy");
    let policy = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.27\n");
    std::fs::write(&file, policy).unwrap();
    let args = [
        "--root".as_ref(),
        ws.as_os_str(),
        "--exec".as_ref(),
        "--user".as_ref(),
        "65534".as_ref(),
        "--exec-network-policy".as_ref(),
        file.as_os_str(),
        "--exec-deny-host".as_ref(),
        "denied.test".as_ref(),
        "--audit-log".as_ref(),
        audit.as_os_str(),
    ];
    let server = ServerProcess::start_with(&args, &[]).await;
    let script = format!(
        "curl -sS http://web.test:{port}/; curl -sS http://denied.test/; echo; curl -sS --noproxy '*' http://127.0.0.27:{port}/; echo rc=$?"
    );
    let out = tokio::process::Command::new(BIN)
        .args(["--remote", &server.url, "exec", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("served by name\n"), "{text}");
    assert!(text.contains("denied.test:80: denied"), "{text}");
    assert!(text.contains("rc=7"), "{text}");
    drop(server);
    let log = std::fs::read_to_string(&audit).unwrap();
    let egress: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["method"] == "egress")
        .collect();
    assert_eq!(egress.len(), 2, "{log}");
    assert_eq!(
        (&egress[0]["host"], &egress[0]["outcome"]),
        (&"web.test".into(), &"ok".into())
    );
    assert_eq!(egress[1]["reason"], "denied");
}
