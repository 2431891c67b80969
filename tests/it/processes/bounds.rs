//! What a shell command alone cannot show: output back-pressure with bounded memory, a fork
//! bomb held by its cgroup, the bound on processes at once, the whole tree ended by
//! `terminate` and when the main process exits, no zombies, terminals, descriptors, the
//! time limit, refused sandboxes and requests.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use capfs::process::{
    ExecutorProcesses, LocalProcesses, Network, ProcessEvent, ProcessPolicy, TerminalSize,
};
use capfs::{Access, Sandbox};

use super::{EXEC_UID, Workspace, finish, policy, run, shell};

/// The resident memory of this test process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Polls `condition` every 10 ms for at most `limit`.
async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !condition() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// The process's state letter and how much CPU it has used (user + system ticks).
fn proc_state(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?;
    Some((fields[0].chars().next()?, ticks))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_never_reads_stalls_the_process_with_bounded_memory() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let before = rss_kib();
    // 1 GiB of output, never read.
    let started = processes
        .start(shell(
            "sh",
            "head -c 1073741824 /dev/zero; echo done > finished",
            &ws.root,
        ))
        .await
        .unwrap();
    let pid = started.pid;
    // The writer blocks on its full pipe: its CPU time stops growing while it stays alive.
    let mut last = None;
    let stalled = eventually(Duration::from_secs(30), || {
        let now = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            stat.contains(&format!(") S {pid} "))
                .then(|| proc_state(child))
                .flatten()
        });
        let same = now.is_some() && now == last;
        last = now;
        same
    })
    .await;
    assert!(stalled, "the writer never stalled");
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "the test's memory grew by {grown} KiB");
    assert!(!ws.root.join("finished").exists());
    assert!(started.control.terminate().await.unwrap());
    let done = finish(started, |_| false).await.unwrap();
    assert!(
        done.exit.killed && done.exit.signal == Some(9),
        "{:?}",
        done.exit
    );
    assert!(!ws.root.join("finished").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_held_by_its_task_bound_and_ended_with_its_process() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_max_tasks(64));
    let bomb = "b() { b | b & }; b; sleep 1; n=$(ls /proc | grep -c '^[0-9]'); echo seen $n";
    let started = processes
        .start(shell("bash", bomb, &ws.root))
        .await
        .unwrap();
    let done = finish(started, |_| false).await.unwrap();
    // Every task of the bomb is in the process's cgroup and went with it.
    let seen: Option<u64> = done
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("seen ")?.parse().ok());
    assert!(seen.is_some(), "{}", done.text());
    // Killed tasks whose parent died are reaped by init: only live ones count.
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                    s.contains(&format!("Uid:\t{EXEC_UID}\t"))
                        && s.contains("Name:\tbash")
                        && !s.contains("State:\tZ")
                })
            })
            .count()
    };
    assert!(
        eventually(Duration::from_secs(10), || alive() == 0).await,
        "{} tasks of the bomb remain",
        alive()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_starts_at_once_within_the_bound_and_quota_exceeded_past_it() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_max_processes(200));
    let mut running = Vec::new();
    for i in 0..200 {
        let request = shell("sh", "read line; echo got $line", &ws.root);
        let mut request = request;
        request.pipe_stdin = true;
        running.push(
            processes
                .start(request)
                .await
                .unwrap_or_else(|e| panic!("start {i}: {e}")),
        );
    }
    let refused = processes
        .start(shell("sh", "true", &ws.root))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::QuotaExceeded);
    for started in &running {
        started.control.write(b"x\n").await.unwrap();
    }
    for started in running {
        let done = finish(started, |_| false).await.unwrap();
        assert_eq!(done.text(), "got x\n");
    }
    // Every slot is given back once its process closed.
    run(&processes, shell("sh", "true", &ws.root))
        .await
        .unwrap();
}

fn sleepers(mark: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(mark)
                .then_some(pid)
        })
        .collect()
}

fn zombie_children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.contains(&format!(") Z {me} ")).then_some(pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_ends_a_setsid_daemon_and_leaves_no_zombie() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let mark = format!("3599.{}", std::process::id());
    let command =
        format!("setsid sleep {mark} </dev/null >/dev/null 2>&1 & echo READY; sleep 3600");
    let started = processes
        .start(shell("sh", &command, &ws.root))
        .await
        .unwrap();
    let pid = started.pid;
    let done = finish(started, |out| out.ends_with(b"READY\n"))
        .await
        .unwrap();
    assert!(done.exit.killed, "{:?}", done.exit);
    assert!(eventually(Duration::from_secs(10), || sleepers(&mark).is_empty()).await);
    assert!(
        proc_state(pid).is_none(),
        "the main process {pid} was not reaped"
    );
    assert!(eventually(Duration::from_secs(10), || zombie_children().is_empty()).await);

    // A daemon left behind by a process that exits on its own goes with it.
    let command = format!("setsid sleep {mark} </dev/null >/dev/null 2>&1 & echo READY");
    let done = run(&processes, shell("sh", &command, &ws.root))
        .await
        .unwrap();
    assert!(!done.exit.killed);
    assert!(eventually(Duration::from_secs(10), || sleepers(&mark).is_empty()).await);
}

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
async fn a_process_past_its_time_limit_is_killed() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_time_limit(Duration::from_millis(300)));
    let done = run(&processes, shell("sh", "sleep 3600", &ws.root))
        .await
        .unwrap();
    assert!(
        done.exit.killed && done.exit.signal == Some(9),
        "{:?}",
        done.exit
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_and_requests_that_cannot_be_held_are_refused() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.root.join("inner")).unwrap();
    let nested = Sandbox::new()
        .with_root(&ws.root, Access::ReadWrite)
        .unwrap()
        .with_root(ws.root.join("inner"), Access::ReadOnly)
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
async fn dropping_every_handle_ends_the_tree_and_signals_reach_the_group() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let mark = format!("3598.{}", std::process::id());
    let command = format!("setsid sleep {mark} </dev/null >/dev/null 2>&1 & sleep {mark}");
    let started = processes
        .start(shell("sh", &command, &ws.root))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || sleepers(&mark).len() >= 2).await);
    drop(started);
    assert!(eventually(Duration::from_secs(10), || sleepers(&mark).is_empty()).await);

    let started = processes
        .start(shell("sh", "sleep 3600", &ws.root))
        .await
        .unwrap();
    started.control.signal(15).await.unwrap();
    let done = finish(started, |_| false).await.unwrap();
    assert_eq!(
        (done.exit.signal, done.exit.killed),
        (Some(15), false),
        "{:?}",
        done.exit
    );
}
