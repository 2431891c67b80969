//! The escape table (`tests/escapes/processes.json`, shared with the comparison harness) run
//! through `LocalProcesses`: every case a shell command, in a fresh tree, with the canary
//! tree outside the roots and the read-only root compared byte for byte afterwards, the
//! test's own sockets watched for contact and `/proc` searched for survivors.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capfs::process::{ExecutorProcesses, LocalProcesses, Network};
use capfs::{Access, Sandbox};
use serde_json::Value;

use super::{EXEC_UID, finish, policy, shell};

const TABLE: &str = include_str!("../../escapes/processes.json");

/// Cases whose outcome differs from the table's expectation by design, each with why; they
/// are printed, never asserted (SECURITY.md's process section says the same).
const DOCUMENTED: &[(&str, &str)] = &[
    (
        "tcp-loopback-loopback",
        "Loopback is the process's own loopback (own network namespace), not the host's",
    ),
    (
        "gdb-attach-server",
        "gdb evaluates `print 1` without a process, so its marker shows even when the attach \
         fails with EPERM (ptrace-seize-server holds)",
    ),
    (
        "chmod-outside-owned",
        "Landlock does not mediate metadata changes: a file outside the roots owned by the \
         process's uid can be chmod-ed; run processes as a uid that owns nothing outside them",
    ),
    (
        "touch-outside-owned",
        "Landlock does not mediate utimes: the same limit as chmod-outside-owned",
    ),
    (
        "tools",
        "`ls /` is refused: listing `/` would need read-dir beneath `/`, which lists every \
         directory of the host",
    ),
    (
        "tcp-listen-any-loopback",
        "a listener in the process's own namespace is reachable from nowhere outside it",
    ),
];

const START: &str = "capfs-case-start";

/// A socket of the test's that counts who reaches it.
fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

struct Sockets {
    tcp_port: u16,
    tcp: Arc<AtomicUsize>,
    server_port: u16,
    udp_port: u16,
    udp: Arc<AtomicUsize>,
    abstract_name: String,
    abstract_hits: Arc<AtomicUsize>,
    host_sock: PathBuf,
    host_hits: Arc<AtomicUsize>,
    _sock_dir: tempfile::TempDir,
}

fn tcp_listener(count: Arc<AtomicUsize>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    port
}

fn unix_counter(listener: std::os::unix::net::UnixListener, count: Arc<AtomicUsize>) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
}

impl Sockets {
    fn open() -> Self {
        let tcp = counter();
        let tcp_port = tcp_listener(tcp.clone());
        let server_port = tcp_listener(counter());
        let udp = counter();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_port = socket.local_addr().unwrap().port();
        let udp_count = udp.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while socket.recv(&mut buf).is_ok() {
                udp_count.fetch_add(1, Ordering::SeqCst);
            }
        });
        let abstract_name = format!("capfs-escape-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        let abstract_hits = counter();
        unix_counter(
            std::os::unix::net::UnixListener::bind_addr(&addr).unwrap(),
            abstract_hits.clone(),
        );
        let sock_dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(sock_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let host_sock = sock_dir.path().join("host.sock");
        let host_hits = counter();
        unix_counter(
            std::os::unix::net::UnixListener::bind(&host_sock).unwrap(),
            host_hits.clone(),
        );
        std::fs::set_permissions(&host_sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        Self {
            tcp_port,
            tcp,
            server_port,
            udp_port,
            udp,
            abstract_name,
            abstract_hits,
            host_sock,
            host_hits,
            _sock_dir: sock_dir,
        }
    }
}

/// A fresh tree of the table's placeholders for one case.
struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    ro: PathBuf,
    out: PathBuf,
}

fn fixture(secret: &str, nested: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(&base, 0o755);
    let (root, ro, out) = (base.join("root"), base.join("ro"), base.join("out"));
    for d in [&root, &ro, &out, &out.join("sub")] {
        std::fs::create_dir(d).unwrap();
    }
    mode(&out, 0o777);
    mode(&out.join("sub"), 0o777);
    let files = [
        (out.join("secret.txt"), secret.to_owned()),
        (out.join("sub/deep.txt"), secret.to_owned()),
        (out.join("hard.txt"), format!("hard {secret}\n")),
        (out.join("owned.txt"), "owned\n".to_owned()),
        (out.join("run.sh"), format!("#!/bin/sh\necho {secret}\n")),
        (ro.join("ro.txt"), "readonly\n".to_owned()),
        (root.join("inside.txt"), "inside\n".to_owned()),
    ];
    for (path, text) in &files {
        std::fs::write(path, text).unwrap();
        mode(path, 0o666);
    }
    mode(&out.join("run.sh"), 0o777);
    std::os::unix::fs::chown(out.join("owned.txt"), Some(EXEC_UID), Some(EXEC_UID)).unwrap();
    std::fs::copy("/usr/bin/id", ro.join("suid-id")).unwrap();
    mode(&ro.join("suid-id"), 0o4755);
    std::fs::hard_link(out.join("hard.txt"), root.join("planted-hardlink.txt")).unwrap();
    std::os::unix::fs::symlink(&out, root.join("cwd-link")).unwrap();
    if nested {
        std::fs::create_dir(root.join("nested-ro")).unwrap();
        std::fs::write(root.join("nested-ro/nested.txt"), "nested\n").unwrap();
    }
    for entry in walk(&root) {
        let _ = std::os::unix::fs::lchown(&entry, Some(EXEC_UID), Some(EXEC_UID));
    }
    Fixture {
        _dir: dir,
        base,
        root,
        ro,
        out,
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < found.len() {
        let path = found[i].clone();
        i += 1;
        if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            let mut names: Vec<_> = std::fs::read_dir(&path)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            names.sort();
            found.extend(names);
        }
    }
    found
}

/// Everything about a tree that an escape could change.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    walk(dir)
        .into_iter()
        .map(|path| {
            let m = path.symlink_metadata().unwrap();
            let what = if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if m.is_file() {
                let mut bytes = Vec::new();
                std::fs::File::open(&path)
                    .unwrap()
                    .read_to_end(&mut bytes)
                    .unwrap();
                format!("file {bytes:?}")
            } else {
                format!("type {:?}", m.file_type())
            };
            let meta = format!(
                "{what} mode {:o} owner {}:{} ino {} mtime {}.{}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec()
            );
            (path, meta)
        })
        .collect()
}

fn survivor(mark: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(mark))
    })
}

/// Polls until no process carries `mark`, for at most 10 s; true when one still does.
fn survivor_after_deadline(mark: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while survivor(mark) {
        if Instant::now() > deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_escape_of_the_table_is_held() {
    let table: Value = serde_json::from_str(TABLE).unwrap();
    let mut cases: Vec<&Value> = table["cases"].as_array().unwrap().iter().collect();
    cases.sort_by_key(|c| c["last"].as_bool().unwrap_or(false));
    let sockets = Sockets::open();
    let mut failures = Vec::new();
    let mut ran = 0;
    for (index, case) in cases.iter().enumerate() {
        let name = case["name"].as_str().unwrap();
        let get = |k: &str| case[k].as_str();
        if get("needs").is_some() {
            println!("{name}: skipped (needs {})", get("needs").unwrap());
            continue;
        }
        let secret = format!("SECRET{}x{index}", uuid_like());
        let nonce = format!("n{}x{index}", uuid_like());
        let mark = format!(
            "3599.{:06}",
            100_000 + index * 7 + std::process::id() as usize % 1000
        );
        let nested = get("roots") == Some("nested");
        let fx = fixture(&secret, nested);
        let fill = |s: &str| {
            s.replace("{BASE}", &fx.base.display().to_string())
                .replace("{ROOT}", &fx.root.display().to_string())
                .replace("{RO}", &fx.ro.display().to_string())
                .replace("{OUT}", &fx.out.display().to_string())
                .replace("{SECRET}", &secret)
                .replace("{NONCE}", &nonce)
                .replace("{SERVER_PID}", &std::process::id().to_string())
                .replace("{HARNESS_PID}", &std::process::id().to_string())
                .replace("{SERVER_PORT}", &sockets.server_port.to_string())
                .replace("{EXEC_UID}", &EXEC_UID.to_string())
                .replace("{PORT}", &sockets.tcp_port.to_string())
                .replace("{UDP_PORT}", &sockets.udp_port.to_string())
                .replace("{ABSTRACT}", &sockets.abstract_name)
                .replace("{HOST_SOCK}", &sockets.host_sock.display().to_string())
                .replace("{SLEEP_MARK}", &mark)
        };
        let network = match get("network") {
            Some("loopback") => Network::Loopback,
            Some("all") => Network::All,
            _ => Network::None,
        };
        let expect = get("expect").unwrap_or("held");
        let sandbox = if nested {
            Sandbox::new()
                .with_root(&fx.root, Access::ReadWrite)
                .and_then(|s| s.with_root(fx.root.join("nested-ro"), Access::ReadOnly))
        } else {
            Sandbox::new()
                .with_root(&fx.root, Access::ReadWrite)
                .and_then(|s| s.with_root(&fx.ro, Access::ReadOnly))
        }
        .unwrap();
        let processes =
            match LocalProcesses::new(sandbox, policy(network).with_run_as(EXEC_UID, EXEC_UID)) {
                Ok(p) => p,
                Err(e) if nested && e.kind() == std::io::ErrorKind::InvalidInput => {
                    println!("{name}: held (nested roots refused: {e})");
                    continue;
                }
                Err(e) => panic!("{name}: {e}"),
            };
        let before = (snapshot(&fx.out), snapshot(&fx.ro));
        let counts = |s: &Sockets| {
            [&s.tcp, &s.udp, &s.abstract_hits, &s.host_hits].map(|c| c.load(Ordering::SeqCst))
        };
        let counted = counts(&sockets);
        let cwd = PathBuf::from(fill(get("cwd").unwrap_or("{ROOT}")));
        let command = format!("echo {START}; {}", fill(get("command").unwrap()));
        let request = shell(get("shell").unwrap_or("sh"), &command, &cwd);
        let started = processes.start(request).await;
        let mut escapes = Vec::new();
        let mut output = String::new();
        match (expect, started) {
            ("refused", Ok(_)) => escapes.push("the start was not refused".to_owned()),
            ("refused", Err(_)) => {}
            (_, Err(e)) => escapes.push(format!("the start failed: {e}")),
            (_, Ok(started)) => {
                let terminate = case["terminate"].as_bool().unwrap_or(false);
                let done = finish(started, |out| {
                    terminate && String::from_utf8_lossy(out).contains("READY")
                })
                .await;
                match done {
                    Ok(done) => output = done.text(),
                    Err(e) => escapes.push(format!("did not close: {e}")),
                }
                ran += 1;
                if !output.lines().any(|l| l == START) {
                    escapes.push("the command did not run".to_owned());
                }
            }
        }
        if output.contains(&secret) {
            escapes.push("the secret is in the output".to_owned());
        }
        if snapshot(&fx.out) != before.0 {
            escapes.push("the outside tree changed".to_owned());
        }
        if snapshot(&fx.ro) != before.1 {
            escapes.push("the read-only root changed".to_owned());
        }
        let after = counts(&sockets);
        for check in case["escaped_if"].as_array().into_iter().flatten() {
            let check = check.as_str().unwrap();
            let hit = match check {
                "marker" => output.lines().any(|l| l.trim() == "ESCAPED"),
                "listener" => after[0] != counted[0],
                "udp" => after[1] != counted[1],
                "abstract" => after[2] != counted[2],
                "host_socket" => after[3] != counted[3],
                "survivor" => survivor_after_deadline(&mark),
                "server_dead" => false,
                other => match other.strip_prefix("leftover:") {
                    Some(path) => {
                        let path = PathBuf::from(fill(path));
                        let there = path.symlink_metadata().is_ok();
                        let _ = std::fs::remove_file(&path);
                        there
                    }
                    None => panic!("{name}: unknown check {other}"),
                },
            };
            if hit {
                escapes.push(format!("escaped: {check}"));
            }
        }
        if expect == "allowed" && !output.lines().any(|l| l.trim() == "ALLOWED") {
            escapes.push("the allowed control did not print ALLOWED".to_owned());
        }
        let documented = DOCUMENTED.iter().find(|(n, _)| *n == name);
        match (escapes.is_empty(), expect, documented) {
            (true, _, _) => println!(
                "{name}: {}",
                if expect == "allowed" {
                    "allowed"
                } else {
                    "held"
                }
            ),
            (false, "held-or-documented", _) => println!("{name}: documented limit: {escapes:?}"),
            (false, _, Some((_, why))) => {
                println!("{name}: differs by design ({why}): {escapes:?}")
            }
            (false, _, None) => {
                println!("{name}: FAILED {escapes:?}\n{output}");
                failures.push(format!("{name}: {escapes:?}"));
            }
        }
    }
    assert!(ran > 50, "only {ran} cases ran");
    assert!(failures.is_empty(), "{failures:#?}");
}

fn uuid_like() -> String {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut bytes)
        .unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
