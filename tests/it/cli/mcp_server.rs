//! `capfs mcp` reaches a server with the client's flags and environment: `--ca-file` for a
//! `wss://` server behind TLS, `--connect-timeout` for a server that never answers the
//! handshake (through a URL and through a command), `CAPFS_REMOTE`. Listings past the reply
//! budget are cut to it, not refused.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;

use serde_json::{Value, json};

use super::connecting::wss_in_front;
use super::*;

/// A `capfs mcp` process and the lines it writes on stdout.
struct McpProcess {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl McpProcess {
    fn start(args: &[&str]) -> Self {
        Self::start_with(args, &[])
    }

    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = client()
            .arg("mcp")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The reply to request `id`, skipping anything else the server writes first.
    fn reply(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no reply to {id}: {e}"));
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Initializes the session, as an MCP client does before its calls.
    fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "it", "version": "0"},
            }}),
        );
        let init = self.reply(1);
        assert_eq!(init["result"]["serverInfo"]["name"], "capfs", "{init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// The text of a tool call's first content block.
    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> String {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
        let reply = self.reply(id);
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_string()
    }
}

impl Drop for McpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_reaches_a_wss_server_with_the_ca_file() {
    let env = Env::new().await;
    fs::write(env.ws.join("a"), "through tls").unwrap();
    let (url, ca_file, proxy) = wss_in_front(&env).await;

    let mut mcp = McpProcess::start(&["--remote", &url, "--ca-file", ca_file.to_str().unwrap()]);
    mcp.initialize();
    let allowed = mcp.call(2, "list_allowed_directories", json!({}));
    assert_eq!(
        allowed,
        format!("Allowed directories:\n{}", env.ws.display())
    );
    let text = mcp.call(3, "read_text_file", json!({"path": env.ws("a")}));
    assert_eq!(text, "through tls");
    drop(mcp);

    // Without it the platform's roots do not know the authority: no session starts.
    let out = client().args(["mcp", "--remote", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("capfs: capfs mcp: cannot connect to ")
            && stderr.contains("certificate"),
        "{}",
        describe(&out)
    );
    proxy.abort();

    // Nothing named on the command line: the environment names the server, as for the client.
    let mut mcp = McpProcess::start_with(&[], &[("CAPFS_REMOTE", &env.server.url)]);
    mcp.initialize();
    let allowed = mcp.call(2, "list_allowed_directories", json!({}));
    assert_eq!(
        allowed,
        format!("Allowed directories:\n{}", env.ws.display())
    );
}

/// Runs `capfs ARGS` against nothing that answers and returns how long it took to give up;
/// it must fail with `status`, saying it timed out.
fn gives_up(args: &[&str], status: i32) -> Duration {
    let started = Instant::now();
    let out = client().args(args).output().unwrap();
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(status),
        "{args:?}: {}",
        describe(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("timed out"),
        "{args:?}: {}",
        describe(&out)
    );
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connect_timeout_bounds_a_server_that_never_answers() {
    // The kernel completes the TCP handshake into the backlog; nothing ever reads the upgrade.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", silent.local_addr().unwrap());
    // Far below the 10s default: a flag that did not reach the connection would wait that long.
    let bound = Duration::from_secs(8);
    for args in [
        vec!["mcp", "--connect-timeout", "300ms", "--remote", &url],
        vec![
            "mcp",
            "--connect-timeout",
            "300ms",
            "--remote-command",
            "sleep 100",
        ],
    ] {
        let took = gives_up(&args, 1);
        assert!(took < bound, "{args:?} took {took:?}");
    }
    // A server named by the environment is a server too: no local audit log beside it.
    let out = client()
        .args(["mcp", "--audit-log", "-"])
        .env("CAPFS_REMOTE", &url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--audit-log is for local roots"),
        "{}",
        describe(&out)
    );
    // The client commands take the same flag from the same definition.
    let took = gives_up(
        &["--connect-timeout", "300ms", "--remote", &url, "ls", "/"],
        5,
    );
    assert!(took < bound, "ls took {took:?}");
    drop(silent);
}

/// A tree whose listings pass the 8 MiB reply budget (22,000 files of 200-byte names) is
/// answered cut: the first block the tree's JSON, or one entry a line, the second a note of how
/// many entries were left out. (`list_directory_with_sizes`, which stats every entry, is
/// checked by `tests/mcp/replies.test.mjs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_past_the_reply_budget_are_cut_with_a_note() {
    const FILES: usize = 22_000;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let flat = ws.join("flat");
    fs::create_dir(&flat).unwrap();
    for i in 0..FILES {
        fs::File::create(flat.join(format!("{i:05}{}", "n".repeat(195)))).unwrap();
    }
    let mut mcp = McpProcess::start(&[ws.to_str().unwrap()]);
    mcp.initialize();
    let calls = [
        ("directory_tree", json!({"path": ws}), FILES + 1),
        (
            "search_files",
            json!({"path": ws, "pattern": "**"}),
            FILES + 1,
        ),
        ("list_directory", json!({"path": flat}), FILES),
    ];
    for (id, (tool, arguments, found)) in (2..).zip(calls) {
        mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
        let reply = mcp.reply(id);
        let bytes = reply.to_string().len();
        assert!(bytes <= 8 << 20, "{tool}: {bytes} bytes");
        let result = &reply["result"];
        let text = |i: usize| result["content"][i]["text"].as_str().unwrap_or_default();
        assert_eq!(result["isError"], false, "{tool}: {}", text(0));
        assert_eq!(result["structuredContent"]["content"], text(0), "{tool}");
        let note = text(1);
        let prefix = "(results truncated: ";
        let counts = note
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{tool}: {note}"));
        let (left, rest) = counts.split_once(" of the ").unwrap();
        let left: usize = left.parse().unwrap();
        let expected =
            format!("{found} entries found are left out to keep the reply within 8388608 bytes; ");
        assert!(rest.starts_with(&expected), "{tool}: {note}");
        assert!(0 < left && left < found, "{tool}: {note}");
        let shown = match tool {
            "directory_tree" => {
                let tree: Value = serde_json::from_str(text(0)).unwrap();
                assert_eq!(tree[0]["name"], "flat");
                tree[0]["children"].as_array().unwrap().len() + 1
            }
            _ => text(0).lines().count(),
        };
        assert_eq!(shown + left, found, "{tool}: {note}");
    }
}
