//! What a process is given and refused at its start: its terminal, its descriptors, its
//! environment, its network, the sandboxes and requests that cannot be held.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;

use capfs::process::{
    ExecutorProcesses, LocalProcesses, Network, ProcessEvent, ProcessPolicy, TerminalSize,
};
use capfs::{Access, Sandbox};

use super::{EXEC_UID, Workspace, finish, policy, run, shell};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_reads_what_is_written_and_sees_its_size() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let mut request = shell(
        "sh",
        "stty size; read line; echo got:$line; stty size",
        &ws.root,
    );
    request.tty = Some(TerminalSize {
        rows: 30,
        cols: 100,
    });
    let mut started = processes.start(request).await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("30 100") {
        match started.events.recv().await.unwrap() {
            ProcessEvent::Output { bytes, .. } => seen.extend(bytes),
            other => panic!(
                "{other:?} before the size: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    started
        .control
        .resize(TerminalSize {
            rows: 40,
            cols: 120,
        })
        .await
        .unwrap();
    started.control.write(b"hello\n").await.unwrap();
    let done = finish(started, |_| false).await.unwrap();
    let text = done.text();
    assert!(text.contains("got:hello"), "{text}");
    assert!(text.contains("40 120"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_three_descriptors_reach_the_program_and_no_controlling_terminal() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    // The listing's own descriptor (of `ls`) is the fourth.
    let done = run(&processes, shell("sh", "exec ls /proc/self/fd; ", &ws.root))
        .await
        .unwrap();
    let fds: Vec<&str> = done
        .output
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{}", done.text());
    let done = run(
        &processes,
        shell("sh", "exec 3</dev/tty && echo ESCAPED", &ws.root),
    )
    .await
    .unwrap();
    assert!(!done.text().contains("ESCAPED"), "{}", done.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_the_requests_alone_and_the_starters_is_unreadable() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let mut request = shell(
        "sh",
        "env; cat /proc/$PPID/environ /proc/1/environ",
        &ws.root,
    );
    request.env.push(("GIVEN".into(), "yes".into()));
    let done = run(&processes, request).await.unwrap();
    let text = done.text();
    assert!(text.contains("GIVEN=yes"));
    // The private temporary directory was there and is gone once the process closed.
    let temp = text
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap();
    assert!(temp.contains("capfs-process-"), "{text}");
    assert!(
        !std::path::Path::new(temp).exists(),
        "{temp} is left behind"
    );
    // The test's own environment has HOME (and PATH other than the request's).
    let own = std::fs::read(format!("/proc/{}/environ", std::process::id())).unwrap();
    assert!(!own.is_empty());
    for var in String::from_utf8_lossy(&own)
        .split('\0')
        .filter(|v| v.len() > 8)
    {
        if !var.starts_with("PATH=") && !var.starts_with("LC_ALL=") {
            assert!(!text.contains(var), "{var} leaked: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_and_requests_that_cannot_be_held_are_refused() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.root.join("inner")).unwrap();
    // A writable root inside another could be moved away by a process: refused. (A read-only
    // one inside a writable one is held by a read-only mount: the escape table's nested-ro-*.)
    let nested = Sandbox::new()
        .with_root(&ws.root, Access::ReadWrite)
        .unwrap()
        .with_root(ws.root.join("inner"), Access::ReadWrite)
        .unwrap();
    let err = LocalProcesses::new(
        nested,
        ProcessPolicy::default().with_run_as(EXEC_UID, EXEC_UID),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let sandbox = Sandbox::new()
        .with_root(&ws.root, Access::ReadWrite)
        .unwrap();
    let err = LocalProcesses::new(sandbox, ProcessPolicy::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let processes = ws.processes(policy(Network::None));
    let empty = shell("sh", "", &ws.root);
    let mut no_argv = empty.clone();
    no_argv.argv.clear();
    assert_eq!(
        processes.start(no_argv).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let mut missing = empty.clone();
    missing.argv = vec!["no-such-program-here".into()];
    assert_eq!(
        processes.start(missing).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let mut outside = empty.clone();
    outside.cwd = capfs::AbsolutePathBuf::new("/etc").unwrap();
    assert_eq!(
        processes.start(outside).await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    // A narrowing to a directory inside narrows: the root beside it is out of reach.
    std::fs::write(ws.root.join("beside.txt"), "BESIDE-CONTENT").unwrap();
    let mut narrowed = shell(
        "sh",
        "cat ../beside.txt || echo REFUSED",
        &ws.root.join("inner"),
    );
    narrowed.narrowing = Some(vec![(
        capfs::AbsolutePathBuf::new(ws.root.join("inner")).unwrap(),
        Access::ReadWrite,
    )]);
    // A writable directory inside a root could be moved away, and one inside a read-only root
    // is refused with it; only a read-only one inside a writable root is held (`read_only.rs`).
    for (outer, inner) in [
        (Access::ReadWrite, Access::ReadWrite),
        (Access::ReadOnly, Access::ReadWrite),
        (Access::ReadOnly, Access::ReadOnly),
    ] {
        let mut nested = narrowed.clone();
        nested.narrowing = Some(vec![
            (capfs::AbsolutePathBuf::new(&ws.root).unwrap(), outer),
            (
                capfs::AbsolutePathBuf::new(ws.root.join("inner")).unwrap(),
                inner,
            ),
        ]);
        let refused = processes.start(nested).await.unwrap_err();
        assert_eq!(
            refused.kind(),
            ErrorKind::InvalidInput,
            "{outer:?} {inner:?}: {refused}"
        );
    }
    let done = run(&processes, narrowed).await.unwrap();
    assert!(
        done.text().contains("REFUSED") && !done.text().contains("BESIDE-CONTENT"),
        "{}",
        done.text()
    );
    // A root's own name cannot be moved: its parent is not writable.
    let moved = run(
        &processes,
        shell(
            "sh",
            &format!("mv {0} {0}.moved && echo MOVED", ws.root.display()),
            &ws.root,
        ),
    )
    .await
    .unwrap();
    assert!(!moved.text().contains("MOVED") && ws.root.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_is_the_processs_own_and_none_has_no_loopback_at_all() {
    let ws = Workspace::new();
    // A listener and a client inside the process, on its own 127.0.0.1.
    let command = "perl -MSocket -e 'socket(L, AF_INET, SOCK_STREAM, 0) or die; \
        bind(L, pack_sockaddr_in(0, inet_aton(\"127.0.0.1\"))) or die \"bind: $!\"; listen(L, 1) or die; \
        my ($port) = unpack_sockaddr_in(getsockname(L)); socket(C, AF_INET, SOCK_STREAM, 0) or die; \
        connect(C, pack_sockaddr_in($port, inet_aton(\"127.0.0.1\"))) or die \"connect: $!\"; print \"OWN\\n\"'";
    let own = run(
        &ws.processes(policy(Network::Loopback)),
        shell("sh", command, &ws.root),
    )
    .await
    .unwrap();
    assert_eq!(own.text(), "OWN\n");
    let none = run(
        &ws.processes(policy(Network::None)),
        shell("sh", command, &ws.root),
    )
    .await
    .unwrap();
    assert!(!none.text().contains("OWN"), "{}", none.text());
    match ws.processes(policy(Network::None)).confinement() {
        capfs::process::Confinement::Enforced(how) => assert!(how.contains("landlock"), "{how}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_sockets_are_refused_without_the_host_network_but_socket_pairs_work() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let command = "perl -MSocket -e 'socketpair(A, B, AF_UNIX, SOCK_STREAM, 0) or die; print \"PAIR\\n\"; \
        socket(S, AF_UNIX, SOCK_STREAM, 0) and print \"SOCKET\\n\"'";
    let done = run(&processes, shell("sh", command, &ws.root))
        .await
        .unwrap();
    assert_eq!(done.text(), "PAIR\n");
    let all = run(
        &ws.processes(policy(Network::All)),
        shell("sh", command, &ws.root),
    )
    .await
    .unwrap();
    assert_eq!(all.text(), "PAIR\nSOCKET\n");
}

/// Set in the environment of this test binary run again as an unprivileged user.
const INNER: &str = "CAPFS_PROCESS_TEST_UNPRIVILEGED";

#[test]
fn an_unprivileged_starter_confines_with_a_user_namespace() {
    super::rerun_unprivileged("processes::session::unprivileged_inner", INNER);
}

#[tokio::test(flavor = "current_thread")]
async fn unprivileged_inner() {
    if std::env::var_os(INNER).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sandbox = Sandbox::new().with_root(&root, Access::ReadWrite).unwrap();
    let processes = LocalProcesses::new(sandbox, ProcessPolicy::default()).unwrap();
    // The init runs as the same user here: Landlock's signal scope refuses the kill, and an
    // init ignores a signal from inside its namespace anyway; had it ended, the kernel would
    // have killed the shell with it, before its last line.
    let command = "echo hi > f && cat f; cat /etc/passwd >/dev/null && echo READ; \
        ls /root >/dev/null 2>&1 || echo DENIED; { exec 3<>/dev/tcp/127.0.0.1/1; } 2>/dev/null || echo NONET; \
        kill -KILL 1 2>/dev/null && echo SENT || echo REFUSED; sleep 0.2; echo STILL-HERE";
    let done = run(&processes, shell("bash", command, &root))
        .await
        .unwrap();
    assert_eq!(
        done.text(),
        "hi\nREAD\nDENIED\nNONET\nREFUSED\nSTILL-HERE\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_read_only_path_is_readable_only_and_file_sizes_are_bounded() {
    let ws = Workspace::new();
    let extra = tempfile::tempdir().unwrap();
    std::fs::write(extra.path().join("data.txt"), "EXTRA\n").unwrap();
    let open = std::fs::Permissions::from_mode(0o777);
    std::fs::set_permissions(extra.path(), open.clone()).unwrap();
    std::fs::set_permissions(extra.path().join("data.txt"), open).unwrap();
    let policy = policy(Network::None)
        .with_read_only_path(extra.path())
        .with_file_size_limit(4096);
    let processes = ws.processes(policy);
    let command = format!(
        "cat {0}/data.txt; echo x >> {0}/data.txt || echo REFUSED; head -c 10000 /dev/zero > big",
        extra.path().display()
    );
    let done = run(&processes, shell("sh", &command, &ws.root))
        .await
        .unwrap();
    assert!(done.text().starts_with("EXTRA\n"), "{}", done.text());
    assert!(done.text().contains("REFUSED"), "{}", done.text());
    assert_eq!(
        std::fs::read_to_string(extra.path().join("data.txt")).unwrap(),
        "EXTRA\n"
    );
    // Past RLIMIT_FSIZE the writer gets SIGXFSZ; the file stops at the bound.
    assert_eq!(std::fs::metadata(ws.root.join("big")).unwrap().len(), 4096);
}
