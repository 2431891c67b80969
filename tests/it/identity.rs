//! One identity for everything an agent causes: `capfs serve` started as root acts as the
//! owner of its roots (or `--user`), its file side creates and replaces files as that user,
//! keeps the owner and mode of what it replaces, refuses what no single user fits and roots the
//! user cannot reach, and — with a file-side confinement bug simulated — the user's own
//! permissions still stop the escape at a root-owned canary.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::names_in;
use crate::codex_protocol::uri;
use crate::process_wire::{Peer, until_closed};
use crate::processes::eventually;
use crate::serve::{RawPeer, ServerProcess};

/// The unprivileged user of these tests.
const NOBODY: u32 = 65534;

/// A directory everyone can traverse holding `ws/`, owned by `owner`, and a root-owned canary
/// beside it.
fn owned_workspace(owner: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::chown(&ws, Some(owner), Some(owner)).unwrap();
    std::fs::write(dir.path().join("canary.txt"), b"canary").unwrap();
    let ws = ws.canonicalize().unwrap();
    (dir, ws)
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The real, effective, saved and file-system user ids of process `pid`, the same in every one
/// of its threads, which all hold no capability and no supplementary group.
fn uids_of(pid: u32) -> String {
    let mut seen = std::collections::BTreeSet::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap();
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            line.split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
        assert_eq!(field("CapPrm:"), "0000000000000000", "{status}");
        assert_eq!(field("Groups:"), "", "{status}");
        seen.insert(field("Uid:"));
    }
    assert_eq!(seen.len(), 1, "threads act as different users: {seen:?}");
    seen.into_iter().next().unwrap()
}

fn owner(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

async fn write(peer: &mut RawPeer, path: &Path, base64: &str) -> Value {
    peer.request(
        "fs/writeFile",
        json!({"path": uri(path.display()), "dataBase64": base64}),
    )
    .await
}

#[tokio::test]
async fn served_as_root_the_file_side_acts_as_the_owner_of_its_roots() {
    if !is_root() {
        return;
    }
    let (_dir, ws) = owned_workspace(NOBODY);
    // A file the user has, with a mode and group of its own: a replace keeps all three.
    let kept = ws.join("kept.txt");
    std::fs::write(&kept, b"old").unwrap();
    std::os::unix::fs::chown(&kept, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
    let server = ServerProcess::start(&ws).await;
    assert_eq!(uids_of(server.pid()), "65534 65534 65534 65534");
    let mut peer = RawPeer::ready(&server.url).await;
    let made = write(&mut peer, &ws.join("new/deep/made.txt"), "eA==").await;
    assert!(made.get("error").is_some(), "no parent: {made}");
    let dir = peer
        .request(
            "fs/createDirectory",
            json!({"path": uri(ws.join("new/deep").display()), "recursive": true}),
        )
        .await;
    assert!(dir.get("result").is_some(), "{dir}");
    let made = write(&mut peer, &ws.join("new/deep/made.txt"), "eA==").await;
    assert!(made.get("result").is_some(), "{made}");
    let replaced = write(&mut peer, &kept, "bmV3").await;
    assert!(replaced.get("result").is_some(), "{replaced}");
    // Files and directories the file side made are the user's, with modes from umask 022.
    assert_eq!(owner(&ws.join("new")), (NOBODY, NOBODY, 0o755));
    assert_eq!(owner(&ws.join("new/deep")), (NOBODY, NOBODY, 0o755));
    assert_eq!(
        owner(&ws.join("new/deep/made.txt")),
        (NOBODY, NOBODY, 0o644)
    );
    assert_eq!(owner(&kept), (NOBODY, NOBODY, 0o640));
    assert_eq!(std::fs::read(&kept).unwrap(), b"new");
    server.stop().await;
}

#[tokio::test]
async fn a_replace_that_cannot_keep_the_owner_leaves_the_file_as_it_was() {
    if !is_root() {
        return;
    }
    let (_dir, ws) = owned_workspace(NOBODY);
    // A root-owned file in the user's workspace: the user cannot give a new file root's
    // ownership, so the write is refused rather than handing root's file to the user.
    let roots = ws.join("roots.txt");
    std::fs::write(&roots, b"root's").unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o666)).unwrap();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let refused = write(&mut peer, &roots, "eA==").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("belongs to uid 0 gid 0"), "{refused}");
    assert_eq!(std::fs::read(&roots).unwrap(), b"root's");
    assert_eq!(owner(&roots), (0, 0, 0o666));
    let names: Vec<_> = std::fs::read_dir(&ws).unwrap().collect();
    assert_eq!(names.len(), 1, "a temporary file was left: {names:?}");
    server.stop().await;
}

/// Runs `capfs serve ARGS` expecting it to refuse to start; returns its stderr.
fn refused_start(args: &[&std::ffi::OsStr]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .arg("serve")
        .args(["--listen", "ws://127.0.0.1:0"])
        .args(args)
        .env_remove("CAPFS_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "it started: {stderr}");
    assert!(output.stdout.is_empty(), "it printed a URL: {stderr}");
    stderr
}

#[test]
fn roots_of_different_owners_are_refused_naming_the_flag() {
    if !is_root() {
        return;
    }
    let (_a, ws_a) = owned_workspace(NOBODY);
    let (_b, ws_b) = owned_workspace(0);
    let stderr = refused_start(&[
        "--root".as_ref(),
        ws_a.as_os_str(),
        "--root".as_ref(),
        ws_b.as_os_str(),
    ]);
    assert!(stderr.contains("different users"), "{stderr}");
    assert!(stderr.contains("--user UID[:GID]"), "{stderr}");
}

#[test]
fn a_root_the_user_cannot_reach_is_refused_naming_what_blocks_it() {
    if !is_root() {
        return;
    }
    let (dir, _) = owned_workspace(NOBODY);
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let ws = private.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::chown(&ws, Some(NOBODY), Some(NOBODY)).unwrap();
    let stderr = refused_start(&["--root".as_ref(), ws.as_os_str()]);
    let private = private.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!(
            "{} (mode 0700, owner uid 0 gid 0)",
            private.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("uid 65534 gid 65534 cannot reach"),
        "{stderr}"
    );
}

#[tokio::test]
async fn processes_run_as_the_same_user_see_no_host_process_and_share_a_private_home() {
    if !is_root() {
        return;
    }
    let (_dir, ws) = owned_workspace(NOBODY);
    let (server, mut peer) = serve_processes(&ws).await;
    let script = "echo pid=$$; ls /proc | grep -c '^[0-9]'; id -u; echo home=$HOME; \
                  echo kept > $HOME/.profile-of-agent; echo shell > made.txt";
    let first = run(&mut peer, &ws, "one", script).await;
    let home = value_of(&first, "home=");
    // Its own PID namespace: the program is the second process (after its init), and /proc
    // lists its own few processes only, never the server.
    assert!(first.contains("pid=2\n"), "{first}");
    let listed: usize = first.lines().nth(1).unwrap().parse().unwrap();
    assert!(listed < 8, "/proc lists {listed} processes: {first}");
    assert!(first.contains("\n65534\n"), "{first}");
    assert!(
        !Path::new(&home).starts_with(&ws),
        "home {home} inside the root"
    );
    assert_eq!(owner(Path::new(&home)), (NOBODY, NOBODY, 0o700));
    assert_eq!(owner(&ws.join("made.txt")), (NOBODY, NOBODY, 0o644));
    // A second process of the session has the same home, with what the first left there.
    let second = run(
        &mut peer,
        &ws,
        "two",
        "echo home=$HOME; cat $HOME/.profile-of-agent",
    )
    .await;
    assert_eq!(value_of(&second, "home="), home);
    assert!(second.contains("kept"), "{second}");
    server.stop().await;
    assert!(
        !Path::new(&home).exists(),
        "the home outlived its session's server"
    );
}

#[tokio::test]
async fn a_sessions_processes_without_a_network_share_one_empty_namespace_and_nothing_else() {
    if !is_root() {
        return;
    }
    let (_dir, ws) = owned_workspace(NOBODY);
    let (server, mut peer) = serve_processes(&ws).await;
    let script = "for ns in net user pid mnt; do echo $ns=$(readlink /proc/self/ns/$ns); done; \
                  grep -c : /proc/net/dev";
    // Both processes live while the second looks: a namespace's number is given again once
    // the namespace is gone, so only two that exist at once are told apart by it. The first
    // writes what it sees to a file and waits (bounded) for the test's word to end; the
    // second waits (bounded) for that file.
    let wait_for = |file: &str| {
        format!("i=0; while [ ! -e {file} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done")
    };
    let one = format!(
        "({script}) > one.tmp && mv one.tmp one.txt; {}",
        wait_for("go")
    );
    let start = json!({
        "processId": "one", "argv": ["sh", "-c", one], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "core", "ignoreDefaultExcludes": false, "exclude": [],
            "set": {}, "includeOnly": []},
        "tty": false, "pipeStdin": false, "arg0": null,
    });
    let reply = peer.request("process/start", start).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let two = format!("{}; {script}", wait_for("one.txt"));
    let second = run(&mut peer, &ws, "two", &two).await;
    std::fs::write(ws.join("go"), b"").unwrap();
    let told = until_closed(&mut peer, "one").await;
    assert_eq!(told.exit_code, Some(0), "{told:?}");
    let first = std::fs::read_to_string(ws.join("one.txt")).unwrap();
    // One network namespace for the session, not the host's; its only interface is the
    // loopback, which is down (`ip`-less: /proc/net/dev lists it, nothing else).
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_eq!(value_of(&first, "net="), value_of(&second, "net="));
    assert_ne!(value_of(&first, "net="), host.to_string_lossy());
    assert!(first.ends_with("\n1\n"), "{first}");
    // Everything else stays each process's own.
    for ns in ["user=", "pid=", "mnt="] {
        assert_ne!(value_of(&first, ns), value_of(&second, ns), "{ns}");
    }
    // Nothing reaches out of it: no TCP (Landlock) and no UDP (no interface up).
    let refused = run(
        &mut peer,
        &ws,
        "udp",
        "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         try:\n s.sendto(b\"x\", (\"127.0.0.1\", 9)); print(\"sent\")\n\
         except OSError as e: print(\"refused\", e.errno)'",
    )
    .await;
    assert!(refused.starts_with("refused"), "{refused}");
    // Another session gets a namespace of its own.
    let mut other = Peer::ready(&server.url).await;
    let third = run(&mut other, &ws, "three", script).await;
    assert_ne!(value_of(&first, "net="), value_of(&third, "net="));
    server.stop().await;
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_per_process_not_per_user_and_ends_with_its_process() {
    if !is_root() {
        return;
    }
    let (_dir, ws) = owned_workspace(NOBODY);
    let (server, mut peer) = serve_processes(&ws).await;
    // Past the task bound (256 by default) forks fail; perl counts what it started and waits.
    let mark = format!("6{}", std::process::id());
    let bomb = format!(
        "perl -e '$| = 1; my $n = 0; for (1..400) {{ my $p = fork(); last unless defined $p; \
         if ($p == 0) {{ exec \"sleep\", \"{mark}\" }} $n++ }} print \"started $n\\n\"; sleep 1000'"
    );
    let start = json!({
        "processId": "bomb", "argv": ["sh", "-c", bomb], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "core"}, "tty": false, "pipeStdin": false, "arg0": null,
    });
    assert!(
        peer.request("process/start", start)
            .await
            .get("result")
            .is_some()
    );
    let sleepers = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .filter(|cmdline| cmdline.starts_with(format!("sleep\0{mark}").as_bytes()))
            .count()
    };
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("started") {
        let message = peer.next().await.expect("output");
        if message["method"] == "process/output" && message["params"]["processId"] == "bomb" {
            let chunk = message["params"]["chunk"].as_str().unwrap();
            seen.extend(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, chunk).unwrap(),
            );
        }
    }
    // perl's count is the forks that succeeded; its children exec `sleep` after it has
    // printed it, so they are awaited (bounded) before they are counted.
    let text = String::from_utf8_lossy(&seen).into_owned();
    let forked: usize = value_of(&text, "started ").parse().unwrap();
    assert!(
        (100..256).contains(&forked),
        "{forked} forks past a bound of 256"
    );
    let all_running = eventually(Duration::from_secs(20), || sleepers() == forked).await;
    assert!(all_running, "{} of {forked} sleepers seen", sleepers());
    // The bound is the bomb's own: another process of the same user starts and forks.
    let other = run(&mut peer, &ws, "other", "sleep 0 & wait; echo fine").await;
    assert_eq!(other, "fine\n");
    let ended = peer
        .request("process/terminate", json!({"processId": "bomb"}))
        .await;
    assert_eq!(ended["result"]["running"], true, "{ended}");
    until_closed(&mut peer, "bomb").await;
    let gone = eventually(Duration::from_secs(20), || sleepers() == 0).await;
    assert!(gone, "{} of the bomb's tree outlived it", sleepers());
    server.stop().await;
}

/// `capfs serve --exec --user 65534:65534` on `ws`, and a peer of it.
async fn serve_processes(ws: &Path) -> (ServerProcess, Peer) {
    serve_processes_with(ws, &[]).await
}

/// [`serve_processes`] with `more` arguments.
async fn serve_processes_with(ws: &Path, more: &[&std::ffi::OsStr]) -> (ServerProcess, Peer) {
    let mut args = vec![
        "--root".as_ref(),
        ws.as_os_str(),
        "--exec".as_ref(),
        "--user".as_ref(),
        "65534:65534".as_ref(),
    ];
    args.extend_from_slice(more);
    let server = ServerProcess::start_with(&args, &[]).await;
    let peer = Peer::ready(&server.url).await;
    (server, peer)
}

async fn run(peer: &mut Peer, ws: &Path, id: &str, script: &str) -> String {
    let start = json!({
        "processId": id, "argv": ["sh", "-c", script], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "core", "ignoreDefaultExcludes": false, "exclude": [],
            "set": {}, "includeOnly": []},
        "tty": false, "pipeStdin": false, "arg0": null,
    });
    let reply = peer.request("process/start", start).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let told = until_closed(peer, id).await;
    assert_eq!(told.exit_code, Some(0), "{told:?}");
    String::from_utf8(told.stdout).unwrap()
}

fn value_of(output: &str, prefix: &str) -> String {
    output
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {output}"))
        .to_owned()
}

/// The environment variable that makes [`the_users_own_permissions_stop_an_escape_the_file_side_missed`]
/// play the part of a server that became its user.
const CHILD: &str = "CAPFS_TEST_IDENTITY_CHILD";

/// A file-side confinement bug, simulated: an `openat` from a root's own handle with a path
/// that climbs out of it, which the sandbox would never issue. As root it reaches a root-owned
/// canary beside the root; in a process that became the roots' user, as `capfs serve` does,
/// the kernel refuses it on the user's own permissions.
#[test]
fn the_users_own_permissions_stop_an_escape_the_file_side_missed() {
    if let Ok(ws) = std::env::var(CHILD) {
        return escape_as_the_user(Path::new(&ws));
    }
    if !is_root() {
        return;
    }
    let (dir, ws) = owned_workspace(NOBODY);
    let canary = dir.path().join("canary.txt");
    // The simulated bug is real: as root, it overwrites the canary.
    let root = std::fs::File::open(&ws).unwrap();
    let opened = rustix::fs::openat(
        &root,
        "../canary.txt",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::APPEND,
        rustix::fs::Mode::empty(),
    );
    assert!(opened.is_ok(), "the simulated escape does not escape");
    drop(opened);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "identity::the_users_own_permissions_stop_an_escape_the_file_side_missed",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &ws)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("escape refused as the user"), "{said}");
    assert_eq!(std::fs::read(&canary).unwrap(), b"canary");
}

fn escape_as_the_user(ws: &Path) {
    let sandbox = capfs::Sandbox::new()
        .with_root(ws, capfs::Access::ReadWrite)
        .unwrap();
    let user = capfs::identity::Identity::owner_of(&sandbox).unwrap();
    assert_eq!(user, capfs::identity::Identity::new(NOBODY, NOBODY));
    // The root's handle, opened as root before the change of user, as the server's are.
    let root = std::fs::File::open(ws).unwrap();
    user.assume().unwrap();
    user.check_reach(ws, capfs::Access::ReadWrite).unwrap();
    let root = &root;
    for (path, flags) in [
        ("../canary.txt", rustix::fs::OFlags::WRONLY),
        (
            "../canary.txt",
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::TRUNC,
        ),
        (
            "../planted.txt",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE,
        ),
    ] {
        let opened = rustix::fs::openat(root, path, flags, rustix::fs::Mode::from_raw_mode(0o644));
        assert_eq!(opened.err(), Some(rustix::io::Errno::ACCESS), "{path}");
    }
    // Inside the root the user's permissions let the file side work as usual.
    let inside = rustix::fs::openat(
        root,
        "mine.txt",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE,
        rustix::fs::Mode::from_raw_mode(0o644),
    );
    assert!(inside.is_ok());
    println!("escape refused as the user");
}

#[tokio::test]
async fn a_killed_servers_homes_are_removed_by_the_next_server() {
    if !is_root() {
        return;
    }
    let (dir, ws) = owned_workspace(NOBODY);
    let homes = dir.path().join("homes");
    std::fs::create_dir(&homes).unwrap();
    std::os::unix::fs::chown(&homes, Some(NOBODY), Some(NOBODY)).unwrap();
    let homes_flag = ["--exec-homes".as_ref(), homes.as_os_str()];
    let (first, mut peer) = serve_processes_with(&ws, &homes_flag).await;
    let said = run(
        &mut peer,
        &ws,
        "a",
        "echo left > $HOME/left; echo home=$HOME",
    )
    .await;
    let home = PathBuf::from(value_of(&said, "home="));
    let run_dir = home.parent().unwrap().to_path_buf();
    assert_eq!(run_dir.parent(), Some(homes.as_path()), "{said}");
    // Killed: nothing of it can remove its session's home.
    let pid = first.pid();
    first.signal("KILL");
    let dead = eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .unwrap()
                .trim_start()
                .starts_with('Z')
        })
    })
    .await;
    assert!(dead, "the killed server lives on");
    assert!(home.join("left").exists());

    let (second, mut peer) = serve_processes_with(&ws, &homes_flag).await;
    run(&mut peer, &ws, "b", "true").await;
    assert!(
        !run_dir.exists(),
        "the killed server's homes outlived the next server's start"
    );
    assert_eq!(
        names_in(&homes).len(),
        1,
        "the next server's own run directory"
    );
    second.stop().await;
    assert_eq!(names_in(&homes), Vec::<String>::new());
    drop(first);
}
