//! The bounds a shell command alone cannot show: output back-pressure with bounded memory, a
//! fork bomb held by its cgroup, the bound on processes at once, the whole tree ended by
//! `terminate`, by dropping its handles and when the main process exits, no zombies, the
//! time limit.

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use capfs::process::{ExecutorProcesses, LocalProcesses, Network, ProcessEvent};

use super::{CLOSE_DEADLINE, Workspace, eventually, finish, policy, run, shell};

/// The resident memory of this test process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
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
    // A user of its own, so that the tasks counted here are the bomb's and no other test's.
    const BOMB_UID: u32 = 65533;
    let ws = Workspace::new();
    std::os::unix::fs::chown(&ws.root, Some(BOMB_UID), Some(BOMB_UID)).unwrap();
    let sandbox = capfs::Sandbox::new()
        .with_root(&ws.root, capfs::Access::ReadWrite)
        .unwrap();
    let processes = capfs::LocalProcesses::new(
        sandbox,
        policy(Network::None)
            .with_max_tasks(64)
            .with_run_as(BOMB_UID, BOMB_UID),
    )
    .unwrap();
    // The main shell replaces itself with `sleep` (no fork needed once the bomb has the
    // cgroup full), so it lives while the bomb runs and its exit ends the tree.
    let bomb = "b() { b | b & }; b; exec sleep 3";
    let started = processes
        .start(shell("bash", bomb, &ws.root))
        .await
        .unwrap();
    let live = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                    s.contains(&format!("Uid:\t{BOMB_UID}\t")) && !s.contains("State:\tZ")
                })
            })
            .count()
    };
    let finished = tokio::spawn(finish(started, |_| false));
    let mut most = 0;
    while !finished.is_finished() {
        most = most.max(live());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    finished.await.unwrap().unwrap();
    // The bomb grew, and never past its cgroup's bound (each process is at least one task).
    assert!(most > 2, "the bomb never ran: {most} tasks seen");
    assert!(most <= 64, "{most} tasks of a bomb bounded to 64");
    // Every task of the bomb was in the process's cgroup and went with it (killed tasks whose
    // parent died are reaped by init: only live ones count).
    assert!(
        eventually(Duration::from_secs(10), || live() == 0).await,
        "{} tasks of the bomb remain",
        live()
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

/// A keeper killed from outside ends its whole tree, whenever the kill comes: right after the
/// start returned (the shell may not have made its daemon yet), or once the program runs and
/// has left a daemon. Its init dies with it (by its death signal, and by the server's kill of
/// the keeper's process group, which the init is in; the unit test `process::init` holds the
/// death signal alone), and with the init everything in the namespace; the process closes
/// with the kill's signal, and the helpers' memory, let go of only once none of them runs on
/// it, serves the next start. As root, the process's cgroup ends the tree too; the
/// unprivileged run below has none.
async fn kill_keepers(processes: &LocalProcesses, root: &Path) {
    let mark = format!("3598.{}", std::process::id());
    let command =
        format!("setsid sleep {mark} </dev/null >/dev/null 2>&1 & echo READY; sleep {mark}");
    for round in 0..10 {
        let mut started = processes.start(shell("sh", &command, root)).await.unwrap();
        if round % 2 == 1 {
            let mut output = Vec::new();
            while !output.ends_with(b"READY\n") {
                match tokio::time::timeout(CLOSE_DEADLINE, started.events.recv()).await {
                    Ok(Some(ProcessEvent::Output { bytes, .. })) => output.extend(bytes),
                    other => panic!("round {round}: {other:?} before READY"),
                }
            }
        }
        let keeper = rustix::process::Pid::from_raw(started.pid as i32).unwrap();
        rustix::process::kill_process(keeper, rustix::process::Signal::KILL).unwrap();
        let done = finish(started, |_| false).await.unwrap();
        assert_eq!(done.exit.signal, Some(9), "round {round}: {:?}", done.exit);
        assert!(
            eventually(Duration::from_secs(10), || sleepers(&mark).is_empty()).await,
            "round {round}: part of the tree outlived its keeper: {:?}",
            sleepers(&mark)
        );
    }
    let done = run(processes, shell("sh", "echo after", root))
        .await
        .unwrap();
    assert_eq!(done.text(), "after\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_killed_from_outside_ends_its_tree_and_the_next_start_works() {
    let ws = Workspace::new();
    kill_keepers(&ws.processes(policy(Network::None)), &ws.root).await;
}

const KILLED_INNER: &str = "CAPFS_PROCESS_TEST_UNPRIVILEGED_KILLED_KEEPER";

#[test]
fn a_keeper_killed_from_outside_ends_its_tree_without_a_cgroup_too() {
    super::rerun_unprivileged("processes::bounds::killed_keeper_inner", KILLED_INNER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_keeper_inner() {
    if std::env::var_os(KILLED_INNER).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sandbox = capfs::Sandbox::new()
        .with_root(&root, capfs::Access::ReadWrite)
        .unwrap();
    let processes = LocalProcesses::new(sandbox, policy(Network::None)).unwrap();
    kill_keepers(&processes, &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_that_end_while_the_program_runs_are_reaped_by_its_init() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    // Each `true` is orphaned at once (its subshell exits) and ends soon after: its parent is
    // then the namespace's init, which alone can reap it. Zombies are counted in the
    // process's own `/proc` (its PID namespace's), for at most five seconds.
    let command = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do (true &); done; \
        n=0; while [ $n -lt 100 ]; do \
          z=$(grep -l ') Z ' /proc/[0-9]*/stat 2>/dev/null | wc -l); \
          [ \"$z\" = 0 ] && break; sleep 0.05; n=$((n+1)); \
        done; echo zombies=$z";
    let done = run(&processes, shell("sh", command, &ws.root))
        .await
        .unwrap();
    assert_eq!(done.text(), "zombies=0\n", "{:?}", done.exit);
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

/// Whether `address` lies in a mapping of the process `pid`.
fn maps_address(pid: u32, address: usize) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines().any(|line| {
        let range = line.split_whitespace().next().unwrap_or_default();
        range.split_once('-').is_some_and(|(start, end)| {
            let parse = |hex| usize::from_str_radix(hex, 16).unwrap_or(0);
            (parse(start)..parse(end)).contains(&address)
        })
    })
}

/// A keeper lives as long as its program; were it a copy of the starter, each page the
/// starter writes again would be copied for it first, and the copy unmapped when it ended.
/// A keeper shares its starter's memory instead: a buffer the starter maps after the start is
/// in the keeper's map too (a copy would not have it). The program and its relayed signal
/// still behave, and the starter's memory holds what it wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_shares_its_starters_memory_instead_of_copying_it() {
    const HEAP_BYTES: usize = 64 << 20;
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let mut started = processes
        .start(shell("sh", "echo started; sleep 3600", &ws.root))
        .await
        .unwrap();
    let keeper = started.pid;
    // The program runs: its signal below is relayed, not taken by a shell not yet started.
    let first = tokio::time::timeout(CLOSE_DEADLINE, started.events.recv()).await;
    assert!(
        matches!(&first, Ok(Some(ProcessEvent::Output { bytes, .. })) if bytes == b"started\n"),
        "{first:?}"
    );
    // Large enough for the allocator to map it on its own, after the keeper was made.
    let heap = vec![7u8; HEAP_BYTES];
    let address = heap.as_ptr() as usize;
    assert!(
        maps_address(std::process::id(), address),
        "the buffer is not in this process's own map"
    );
    assert!(
        maps_address(keeper, address),
        "the keeper does not share its starter's memory"
    );
    started.control.signal(15).await.unwrap();
    let done = finish(started, |_| false).await.unwrap();
    assert_eq!(
        (done.text().as_str(), done.exit.signal, done.exit.killed),
        ("", Some(15), false)
    );
    assert_eq!(
        heap.iter().map(|b| usize::from(*b)).sum::<usize>(),
        7 * HEAP_BYTES
    );
}
