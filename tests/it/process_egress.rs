//! `capfs serve --exec` with an egress policy: its flags and file refused at start-up when
//! malformed or combined with the host's network, and a command run through `capfs exec`
//! reaching an allowed name through its proxy, with the connection in the audit log.

use std::process::Stdio;

use crate::codex_protocol::uri;
use crate::process_serve::tree;
use crate::process_wire::{Peer, until_closed};
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
    let err = refused(&ws, &["--exec-transparent-tcp"]);
    assert!(
        err.contains("--exec-transparent-tcp: no host is allowed"),
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
    let (log, egress) = egress_lines(&audit);
    assert_eq!(egress.len(), 2, "{log}");
    assert_eq!(
        (&egress[0]["host"], &egress[0]["outcome"]),
        (&"web.test".into(), &"ok".into())
    );
    assert_eq!(egress[1]["reason"], "denied");
}

/// The capabilities the server at `url` advertises, and a peer of it. codex keeps the copy
/// `initialize` gives and checks it before it sends a managed network, so that copy must say
/// what `environment/info` says.
async fn advertised(url: &str) -> (Peer, serde_json::Value) {
    let mut first = crate::serve::RawPeer::connect(url).await;
    let init = first
        .request("initialize", serde_json::json!({"clientName": "c"}))
        .await;
    let mut peer = Peer::ready(url).await;
    let info = peer
        .request("environment/info", serde_json::json!({}))
        .await;
    let capabilities = info["result"]["capabilities"].clone();
    assert_eq!(
        init["result"]["environmentInfo"]["capabilities"], capabilities,
        "{init}\n{info}"
    );
    (peer, capabilities)
}

fn codex_start(
    ws: &std::path::Path,
    id: &str,
    script: &str,
    network: serde_json::Value,
) -> serde_json::Value {
    let mut start = serde_json::json!({
        "processId": id, "argv": ["sh", "-c", script], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "core", "ignoreDefaultExcludes": false, "exclude": [],
            "set": {}, "includeOnly": []},
        "tty": false, "pipeStdin": false, "arg0": null,
    });
    start
        .as_object_mut()
        .unwrap()
        .extend(network.as_object().unwrap().clone());
    start
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codexs_managed_network_narrows_the_operators_policy_and_never_widens_it() {
    let (_dir, ws, _outside) = tree();
    let web = egress_web("127.0.0.28", b"managed\n").await;
    let port = web.addr.port();
    let mut args: Vec<String> = ["--root", ws.to_str().unwrap(), "--exec", "--user", "65534"]
        .map(String::from)
        .to_vec();
    for name in ["a.test", "b.test"] {
        args.extend([
            "--exec-allow-host".into(),
            format!("{name}:{port}"),
            "--exec-resolve".into(),
            format!("{name}:{port}:127.0.0.28"),
        ]);
    }
    args.extend(["--exec-resolve".into(), format!("c.test:{port}:127.0.0.28")]);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let server = ServerProcess::start_with(&args, &[]).await;
    let (mut peer, capabilities) = advertised(&server.url).await;
    assert_eq!(capabilities["networkProxyLaunch"], true, "{capabilities}");
    let script = format!("for h in a b c; do curl -sS http://$h.test:{port}/; done");
    // codex allows a and c (c is not the operator's) and denies b.
    let network = serde_json::json!({"enforceManagedNetwork": true, "networkProxy": {"proxy": {
        "enabled": true, "enableSocks5": true, "enableSocks5Udp": false,
        "allowUpstreamProxy": false, "dangerouslyAllowAllUnixSockets": false, "mode": "full",
        "domains": {"a.test": "allow", "b.test": "deny", "**.c.test": "allow"},
        "unixSockets": null, "allowLocalBinding": true}}});
    let reply = peer
        .request("process/start", codex_start(&ws, "m", &script, network))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let told = until_closed(&mut peer, "m").await;
    let out = String::from_utf8_lossy(&told.stdout);
    assert_eq!(
        out,
        format!(
            "managed\ncapfs egress: b.test:{port}: denied\ncapfs egress: c.test:{port}: not allowed\n"
        )
    );
    // codex's default, allowLocalBinding off: no loopback address, not even the operator's pin.
    let no_local = serde_json::json!({"enforceManagedNetwork": true, "networkProxy": {"proxy": {
        "enabled": true, "mode": "full", "domains": {"a.test": "allow"}}}});
    let reply = peer
        .request("process/start", codex_start(&ws, "o", &script, no_local))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let told = until_closed(&mut peer, "o").await;
    let out = String::from_utf8_lossy(&told.stdout);
    assert!(out.contains("allowLocalBinding is off"), "{out}");
    assert!(!out.lines().any(|l| l == "managed"), "{out}");
    assert_eq!(out.matches("allowLocalBinding is off").count(), 1, "{out}");
    // codex's limited mode: reading only, no tunnel.
    let limited = serde_json::json!({"networkProxy": {"proxy": {"enabled": true,
        "mode": "limited", "domains": {"a.test": "allow"}, "allowLocalBinding": true}}});
    let reading = format!(
        "curl -sS http://a.test:{port}/; curl -sS -X POST http://a.test:{port}/; \
         curl -sS -x socks5h://127.0.0.1:1080 http://a.test:{port}/; echo socks rc=$?"
    );
    let reply = peer
        .request("process/start", codex_start(&ws, "l", &reading, limited))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let told = until_closed(&mut peer, "l").await;
    let out = String::from_utf8_lossy(&told.stdout);
    assert!(out.starts_with("managed\n"), "{out}");
    assert!(out.contains("reading only: plain-HTTP GET"), "{out}");
    assert!(out.contains("socks rc=97"), "{out}");
    // Enforced with no proxy: no network at all. Transparent TCP: refused, not advertised.
    let closed = serde_json::json!({"enforceManagedNetwork": true});
    peer.request("process/start", codex_start(&ws, "n", &script, closed))
        .await;
    let told = until_closed(&mut peer, "n").await;
    assert_eq!(
        String::from_utf8_lossy(&told.stdout)
            .matches("not allowed")
            .count(),
        3
    );
    let transparent = serde_json::json!({"networkProxy": {"proxy": {"enabled": true},
        "transparentTcp": true}});
    let reply = peer
        .request("process/start", codex_start(&ws, "t", "true", transparent))
        .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(
        capabilities["networkProxyTransparentTcp"], false,
        "{capabilities}"
    );
    server.stop().await;

    // The host's network cannot be held to a managed network: not advertised, refused.
    let args = [
        "--root".as_ref(),
        ws.as_os_str(),
        "--exec".as_ref(),
        "--user".as_ref(),
        "65534".as_ref(),
        "--exec-network".as_ref(),
        "all".as_ref(),
    ];
    let server = ServerProcess::start_with(&args, &[]).await;
    let (mut peer, capabilities) = advertised(&server.url).await;
    assert_eq!(capabilities["networkProxyLaunch"], false, "{capabilities}");
    let reply = peer
        .request(
            "process/start",
            codex_start(
                &ws,
                "h",
                "true",
                serde_json::json!({"enforceManagedNetwork": true}),
            ),
        )
        .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_transparent_tcp_codex_is_told_and_a_tool_that_ignores_the_proxy_gets_through() {
    let (dir, ws, _outside) = tree();
    let web = egress_web("127.0.0.44", b"transparent by name\n").await;
    let port = web.addr.port();
    let audit = dir.path().join("audit.log");
    let allow = format!("web.test:{port}");
    let resolve = format!("web.test:{port}:127.0.0.44");
    let other = format!("other.test:{port}:127.0.0.44");
    let args = [
        "--root".as_ref(),
        ws.as_os_str(),
        "--exec".as_ref(),
        "--user".as_ref(),
        "65534".as_ref(),
        "--exec-allow-host".as_ref(),
        allow.as_ref(),
        "--exec-allow-host".as_ref(),
        "other.test".as_ref(),
        "--exec-resolve".as_ref(),
        resolve.as_ref(),
        "--exec-resolve".as_ref(),
        other.as_ref(),
        "--exec-transparent-tcp".as_ref(),
        "--audit-log".as_ref(),
        audit.as_os_str(),
    ];
    let server = ServerProcess::start_with(&args, &[]).await;
    let (mut peer, capabilities) = advertised(&server.url).await;
    assert_eq!(capabilities["networkProxyLaunch"], true, "{capabilities}");
    assert_eq!(
        capabilities["networkProxyTransparentTcp"], true,
        "{capabilities}"
    );
    // codex asks for transparent TCP and narrows to web.test: other.test, the operator's,
    // gets no address. The test host is on loopback, which codex allows only with
    // `allowLocalBinding`.
    let script = format!(
        "curl -sS --noproxy '*' http://web.test:{port}/; curl -sS --noproxy '*' http://other.test:{port}/; echo other rc=$?"
    );
    let network = serde_json::json!({"enforceManagedNetwork": true, "networkProxy": {
        "proxy": {"enabled": true, "mode": "full", "domains": {"web.test": "allow"},
            "allowLocalBinding": true},
        "transparentTcp": true}});
    let reply = peer
        .request("process/start", codex_start(&ws, "t", &script, network))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let told = until_closed(&mut peer, "t").await;
    let out = String::from_utf8_lossy(&told.stdout);
    assert_eq!(out, "transparent by name\nother rc=6\n");
    server.stop().await;
    let (log, egress) = egress_lines(&audit);
    assert_eq!(egress.len(), 1, "{log}");
    assert_eq!(
        (&egress[0]["via"], &egress[0]["host"], &egress[0]["outcome"]),
        (&"transparent".into(), &"web.test".into(), &"ok".into())
    );
}

/// The audit log at `path`, and its egress lines.
fn egress_lines(path: &std::path::Path) -> (String, Vec<serde_json::Value>) {
    let log = std::fs::read_to_string(path).unwrap();
    let egress = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["method"] == "egress")
        .collect();
    (log, egress)
}
