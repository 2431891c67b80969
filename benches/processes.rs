//! Processes over the exec-server protocol: capfs `serve --exec` confined, capfs unconfined
//! (`--exec-unconfined`, so the difference is the sandbox's own cost), and codex's own
//! `codex exec-server` (the pinned `@openai/codex` of `tests/codex/`) with the sandbox codex
//! sends in workspace-write mode, and without one. The same client and the same requests to
//! each, alternated round by round; medians printed with their ratios.
//!
//! Measured: `process/start` to its reply and to `process/closed` for `true`; to the first
//! output and to `process/closed` for `cat` of a 4 KiB file; and the throughput of 256 MiB of
//! output (`head -c 268435456 /dev/zero`).
//!
//! Run with `cargo bench --bench processes` as root (the confined processes run as uid 65534)
//! after `npm ci` in `tests/codex` (or with `CODEX_BIN` naming a codex binary).
//! `CAPFS_BENCH_STARTS` (default 200) and `CAPFS_BENCH_ROUNDS` (default 3) bound the run; CI
//! sets them small.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[path = "shared/exec_server.rs"]
mod exec_server;

use exec_server::{Spawned, Ws, codex_bin, connect, text};

const OUTPUT_BYTES: usize = 256 << 20;
const EXEC_USER: &str = "65534:65534";

/// A server process, with what each `process/start` to it carries as its `sandbox`.
struct Server {
    name: &'static str,
    process: Spawned,
    sandbox: Value,
}

impl Server {
    fn start(name: &'static str, command: Command, sandbox: Value) -> Self {
        Self {
            name,
            process: Spawned::start(name, command),
            sandbox,
        }
    }
}

/// The file-system context codex 0.169 sends with a command in workspace-write mode.
fn workspace_write(root: &Path) -> Value {
    let uri = format!("file://{}", root.display());
    let special = |kind: &str| json!({"type": "special", "value": {"kind": kind}});
    json!({
        "permissions": {
            "type": "managed",
            "file_system": {"type": "restricted", "entries": [
                {"path": special("root"), "access": "read"},
                {"path": special("project_roots"), "access": "write"},
                {"path": special("slash_tmp"), "access": "write"},
                {"path": special("tmpdir"), "access": "write"},
            ]},
            "network": "restricted",
        },
        "cwd": uri,
        "workspaceRoots": [uri],
        "windowsSandboxLevel": "disabled",
        "windowsSandboxProxySettingsMode": "reconcile",
        "useLegacyLandlock": false,
    })
}

/// The times one process took, from sending its `process/start`.
struct Run {
    reply: Duration,
    first_output: Option<Duration>,
    closed: Duration,
    output_bytes: usize,
}

/// Starts `argv` in `cwd` and reads everything it reports until `process/closed`. Only the
/// method, the chunk's length and the id are looked for in each message's text, so that what
/// is measured is the server.
async fn run(ws: &mut Ws, server: &Server, id: u64, argv: &[&str], cwd: &Path) -> Run {
    let process_id = format!("bench-{id}");
    let start = json!({"id": id, "method": "process/start", "params": {
        "processId": process_id, "metadata": null, "argv": argv,
        "cwd": format!("file://{}", cwd.display()),
        "env": {"LC_ALL": "C.UTF-8"},
        "envPolicy": {"inherit": "core", "ignoreDefaultExcludes": false, "exclude": [], "set": {}, "includeOnly": []},
        "tty": false, "pipeStdin": false, "arg0": null, "sandbox": server.sandbox,
        "enforceManagedNetwork": false, "managedNetwork": null,
    }});
    let started = Instant::now();
    ws.send(Message::text(start.to_string())).await.unwrap();
    let (mut reply, mut first_output, mut output_bytes) = (None, None, 0);
    loop {
        let text = text(ws).await;
        if text.contains("\"process/output\"") {
            first_output.get_or_insert_with(|| started.elapsed());
            let at = text.find(r#""chunk":""#).expect("a chunk") + 9;
            let chunk = &text[at..at + text[at..].find('"').expect("its end")];
            output_bytes +=
                chunk.len() / 4 * 3 - chunk.bytes().rev().take_while(|b| *b == b'=').count();
        } else if text.contains("\"process/closed\"") {
            let closed = started.elapsed();
            return Run {
                reply: reply.expect("the start's reply comes before process/closed"),
                first_output,
                closed,
                output_bytes,
            };
        } else if !text.contains("\"method\"") {
            // The one request in flight is this start: anything without a method is its reply.
            assert!(
                text.contains("\"result\""),
                "{}: process/start: {text}",
                server.name
            );
            reply = Some(started.elapsed());
        }
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[derive(Default)]
struct Figures {
    true_reply: Vec<Duration>,
    true_closed: Vec<Duration>,
    cat_first: Vec<Duration>,
    cat_closed: Vec<Duration>,
    mb_per_s: Vec<f64>,
}

async fn measure(server: &Server, root: &Path, starts: usize, next_id: &mut u64, f: &mut Figures) {
    let mut ws = connect(&server.process.url).await;
    let small = root.join("small");
    let small = small.to_str().expect("UTF-8 path");
    for _ in 0..starts {
        *next_id += 1;
        let r = run(&mut ws, server, *next_id, &["true"], root).await;
        f.true_reply.push(r.reply);
        f.true_closed.push(r.closed);
        *next_id += 1;
        let r = run(&mut ws, server, *next_id, &["cat", small], root).await;
        assert_eq!(
            r.output_bytes, 4096,
            "{}: cat returned the whole file",
            server.name
        );
        f.cat_first.push(r.first_output.expect("cat wrote"));
        f.cat_closed.push(r.closed);
    }
    *next_id += 1;
    let argv = ["head", "-c", "268435456", "/dev/zero"];
    let r = run(&mut ws, server, *next_id, &argv, root).await;
    assert_eq!(
        r.output_bytes, OUTPUT_BYTES,
        "{}: all of the output",
        server.name
    );
    f.mb_per_s
        .push(OUTPUT_BYTES as f64 / 1e6 / r.closed.as_secs_f64());
    let _ = ws.close(None).await;
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        })
        .unwrap_or(default)
}

#[path = "processes/report.rs"]
mod report;

fn main() {
    let starts = env_usize("CAPFS_BENCH_STARTS", 200);
    let rounds = env_usize("CAPFS_BENCH_ROUNDS", 3);
    let dir = tempfile::Builder::new()
        .prefix("capfs-bench-processes-")
        .tempdir_in(std::env::var_os("CAPFS_BENCH_DIR").unwrap_or_else(|| "/tmp".into()))
        .expect("a scratch directory");
    // The server becomes the unprivileged user before it serves: every ancestor of the root
    // must let that user through, and the root let it write.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(root.join("small"), vec![b'x'; 4096]).unwrap();
    let capfs = PathBuf::from(env!("CARGO_BIN_EXE_capfs"));
    let serve = |name, extra: &[&str]| {
        let mut command = Command::new(&capfs);
        command.args(["serve", "--listen", "ws://127.0.0.1:0", "--root"]);
        command.arg(&root).arg("--exec").args(extra);
        Server::start(name, command, Value::Null)
    };
    let mut servers = vec![
        serve("capfs confined", &["--user", EXEC_USER]),
        serve(
            "capfs unconfined",
            &["--exec-unconfined", "--user", EXEC_USER],
        ),
    ];
    // The home lives as long as the servers.
    let codex = codex_bin().map(|bin| (bin, codex_home()));
    match &codex {
        Some((bin, home)) => {
            for (name, sandbox) in [
                ("codex workspace-write", workspace_write(&root)),
                ("codex no sandbox", Value::Null),
            ] {
                let mut command = Command::new(bin);
                command
                    .args(["exec-server", "--listen", "ws://127.0.0.1:0"])
                    .env("CODEX_HOME", home.path());
                servers.push(Server::start(name, command, sandbox));
            }
        }
        None => println!("codex not found (npm ci in tests/codex, or CODEX_BIN): capfs only"),
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut figures: Vec<Figures> = servers.iter().map(|_| Figures::default()).collect();
    let mut next_id = 0;
    runtime.block_on(async {
        for _ in 0..rounds {
            for (server, f) in servers.iter().zip(&mut figures) {
                measure(server, &root, starts, &mut next_id, f).await;
            }
        }
    });
    let names: Vec<&str> = servers.iter().map(|s| s.name).collect();
    report::print(&names, &figures, starts, rounds);
}

/// A home for codex outside the system's temporary directory: codex links its helpers
/// (`codex-linux-sandbox`) into its home when it starts and refuses to under the temporary
/// directory, and on a host with bubblewrap its workspace-write sandbox runs that helper by
/// name inside bwrap (`execvp codex-linux-sandbox: No such file or directory` without it).
fn codex_home() -> tempfile::TempDir {
    let temp = std::env::temp_dir();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    [Some(PathBuf::from("/var/tmp")), home]
        .into_iter()
        .flatten()
        .filter(|base| !base.starts_with(&temp))
        .find_map(|base| {
            tempfile::Builder::new()
                .prefix("capfs-bench-codex-")
                .tempdir_in(base)
                .ok()
        })
        .expect("a directory for codex's home outside the temporary directory")
}
