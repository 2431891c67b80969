//! `LocalProcesses`: the escape table of `tests/escapes/processes.json` run through it
//! (`escapes.rs`), and what a shell command alone cannot show: the bounds (`bounds.rs`:
//! output back-pressure, fork bombs, the bound on processes, the whole tree ended) and what a
//! process is given at its start (`session.rs`: terminals, descriptors, environment, network,
//! refusals).

mod bounds;
mod egress;

pub(crate) use egress::web as egress_web;
mod escapes;
mod exec;
mod read_only;
mod session;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use capfs::process::{
    ExecutorProcesses, LocalProcesses, Network, OutputStream, ProcessEvent, ProcessExit,
    ProcessPolicy, ProcessRequest, StartedProcess,
};
use capfs::{AbsolutePathBuf, Access, Sandbox};

/// The unprivileged user processes run as (`nobody`).
pub(crate) const EXEC_UID: u32 = 65534;

/// The longest a test waits for one process to close.
pub(crate) const CLOSE_DEADLINE: Duration = Duration::from_secs(60);

/// A read-write root owned by the process's user, in a directory others may traverse.
pub(crate) struct Workspace {
    /// Removed with the workspace.
    _base: tempfile::TempDir,
    pub root: PathBuf,
}

impl Workspace {
    pub(crate) fn new() -> Self {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = base.path().canonicalize().unwrap().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::chown(&root, Some(EXEC_UID), Some(EXEC_UID)).unwrap();
        Self { _base: base, root }
    }

    pub(crate) fn processes(&self, policy: ProcessPolicy) -> LocalProcesses {
        let sandbox = Sandbox::new()
            .with_root(&self.root, Access::ReadWrite)
            .unwrap();
        LocalProcesses::new(sandbox, policy.with_run_as(EXEC_UID, EXEC_UID)).unwrap()
    }
}

pub(crate) fn policy(network: Network) -> ProcessPolicy {
    ProcessPolicy::default().with_network(network)
}

/// `sh -c command` in `cwd` with a minimal environment.
pub(crate) fn shell(shell: &str, command: &str, cwd: &Path) -> ProcessRequest {
    let mut request = ProcessRequest::new(
        vec![shell.to_owned(), "-c".to_owned(), command.to_owned()],
        AbsolutePathBuf::new(cwd).unwrap(),
    );
    request.env = vec![
        (
            "PATH".to_owned(),
            "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".to_owned(),
        ),
        ("LC_ALL".to_owned(), "C".to_owned()),
    ];
    request
}

/// What a process wrote (both outputs, in arrival order, and each on its own) and how it
/// ended.
#[derive(Debug)]
pub(crate) struct Finished {
    pub output: Vec<u8>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pub exit: ProcessExit,
}

impl Finished {
    /// Standard output, then standard error: each whole, so that a line of one is never split
    /// by the other. Arrival order across the two pipes is the reader's, not the writer's: under
    /// load, `cat: ` of an error can arrive before a line printed earlier on the other stream.
    pub(crate) fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&self.stderr));
        text
    }
}

/// Reads every event to `Closed`, checking their order; `on_output` sees the output so far
/// and may act on the process (terminate it once it is ready).
pub(crate) async fn finish(
    mut started: StartedProcess,
    mut on_output: impl FnMut(&[u8]) -> bool,
) -> io::Result<Finished> {
    let deadline = Instant::now() + CLOSE_DEADLINE;
    let (mut output, mut stdout, mut stderr) = (Vec::new(), Vec::new(), Vec::new());
    let mut exit = None;
    let mut acted = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, started.events.recv())
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the process did not close"))?;
        match event {
            Some(ProcessEvent::Output { stream, bytes, .. }) => {
                assert!(!bytes.is_empty() && bytes.len() <= 64 * 1024);
                output.extend_from_slice(&bytes);
                match stream {
                    OutputStream::Stderr => stderr.extend_from_slice(&bytes),
                    _ => stdout.extend_from_slice(&bytes),
                }
                if !acted && on_output(&output) {
                    acted = true;
                    started.control.terminate().await?;
                }
            }
            Some(ProcessEvent::Exited(e)) => {
                assert!(exit.is_none(), "two exits");
                exit = Some(e);
            }
            Some(ProcessEvent::Closed) => {
                let exit = exit.expect("Closed before Exited");
                assert!(started.events.recv().await.is_none(), "events after Closed");
                return Ok(Finished {
                    output,
                    stdout,
                    stderr,
                    exit,
                });
            }
            None => panic!("the events ended without Closed"),
            Some(other) => panic!("an event this test does not know: {other:?}"),
        }
    }
}

/// Polls `condition` every 10 ms for at most `limit`.
pub(crate) async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !condition() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Starts `request` and reads it to the end.
pub(crate) async fn run(
    processes: &LocalProcesses,
    request: ProcessRequest,
) -> io::Result<Finished> {
    let started = processes.start(request).await?;
    finish(started, |_| false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_shell_runs_in_its_root() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let done = run(
        &processes,
        shell("sh", "echo hi > made && cat made && id -u && pwd", &ws.root),
    )
    .await
    .unwrap();
    assert_eq!(done.exit, ProcessExit::code(0), "{}", done.text());
    assert_eq!(
        done.text(),
        format!("hi\n{EXEC_UID}\n{}\n", ws.root.display())
    );
}

/// Runs the test `test` of this binary again as the unprivileged `EXEC_UID`, with `marker` set
/// in its environment (the inner test does nothing without it), and asserts it ran and passed.
/// Only root can change to that user; run by another user, there is nothing to run.
pub(crate) fn rerun_unprivileged(test: &str, marker: &str) {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    // A copy of this binary where the user can reach it, wherever the checkout lies (under a
    // private directory, the binary itself is out of the user's reach).
    let reachable = tempfile::tempdir().unwrap();
    std::fs::set_permissions(reachable.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = reachable.path().join("it");
    // A second link to the same file, never open for writing; a copy where links cannot be made
    // (another file system), whose descriptor a process forked meanwhile by another test may
    // hold for an instant ("Text file busy"), so its start is tried again a bounded few times.
    let current = std::env::current_exe().unwrap();
    if std::fs::hard_link(&current, &copy).is_err() {
        std::fs::copy(&current, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = || {
        std::process::Command::new("setpriv")
            .args([
                &format!("--reuid={EXEC_UID}"),
                &format!("--regid={EXEC_UID}"),
                "--clear-groups",
            ])
            .arg(&copy)
            .args([test, "--exact", "--nocapture"])
            .env(marker, "1")
            .current_dir("/")
            .output()
            .unwrap()
    };
    let mut output = run();
    for _ in 0..20 {
        if !String::from_utf8_lossy(&output.stderr).contains("Text file busy") {
            break;
        }
        output = run();
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}
