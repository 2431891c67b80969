//! A cgroup (v1 `pids` controller) per process: it bounds how many tasks the process and
//! everything it starts may have (a fork bomb stops at `pids.max`), and it is how the whole
//! tree is found and killed, daemons that left the session included: a task cannot leave its
//! cgroup without write access to the hierarchy, which the unprivileged user lacks.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, Signal, kill_process};

/// The `pids` hierarchy of cgroup v1.
const PIDS_HIERARCHY: &str = "/sys/fs/cgroup/pids";

/// How many times the tree is listed and killed before giving up: each round kills every
/// task listed, and a task being killed forks no more, so a round finds only what was forked
/// while the previous one ran.
const KILL_ROUNDS: usize = 1000;

/// How long a cgroup whose tasks were killed is waited for before its removal is put off:
/// a killed task stays attached (the directory busy) until its parent or init reaps it.
const REMOVE_DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);

/// Cgroups whose removal was put off, tried again at the next start and at the end.
type Pending = Arc<Mutex<Vec<PathBuf>>>;

/// Where this crate's cgroups are made, when the hierarchy is there and writable.
#[derive(Debug)]
pub(crate) struct CgroupParent {
    dir: PathBuf,
    pending: Pending,
}

impl CgroupParent {
    /// The `capfs` directory of the `pids` hierarchy, made if missing; `None` when there is no
    /// such hierarchy or it is not writable (then `RLIMIT_NPROC` alone bounds a process).
    pub(crate) fn detect() -> Option<Self> {
        let dir = Path::new(PIDS_HIERARCHY).join("capfs");
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        // A child made and removed at once proves the hierarchy takes them.
        let probe = dir.join(format!("probe-{}", uuid::Uuid::new_v4().simple()));
        fs::create_dir(&probe).ok()?;
        let writable = fs::write(probe.join("pids.max"), b"1").is_ok();
        fs::remove_dir(&probe).ok()?;
        writable.then(|| Self {
            dir,
            pending: Pending::default(),
        })
    }

    /// Removes the put-off cgroups that are free now.
    fn sweep(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|dir| {
            fs::remove_dir(dir).is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
        });
    }

    /// A new cgroup with at most `max_tasks` tasks.
    pub(crate) fn create(&self, max_tasks: u64) -> io::Result<Cgroup> {
        self.sweep();
        let dir = self
            .dir
            .join(format!("p-{}", uuid::Uuid::new_v4().simple()));
        fs::create_dir(&dir)?;
        let cgroup = Cgroup {
            dir,
            pending: self.pending.clone(),
        };
        fs::write(cgroup.dir.join("pids.max"), max_tasks.to_string())?;
        Ok(cgroup)
    }
}

/// One process's cgroup; removed when dropped (after its tasks are killed).
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    pending: Pending,
}

impl Cgroup {
    /// `cgroup.procs` opened for writing, for the child to enter by writing `0` to it before
    /// it runs anything.
    pub(crate) fn procs_for_entry(&self) -> io::Result<OwnedFd> {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))?;
        Ok(file.into())
    }

    /// The tasks in the cgroup now.
    pub(crate) fn pids(&self) -> io::Result<Vec<i32>> {
        let text = fs::read_to_string(self.dir.join("cgroup.procs"))?;
        Ok(text
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect())
    }

    /// Kills every task in the cgroup, again until none is left (bounded); returns whether
    /// it is empty.
    pub(crate) fn kill_all(&self) -> bool {
        for _ in 0..KILL_ROUNDS {
            let Ok(pids) = self.pids() else { return false };
            if pids.is_empty() {
                return true;
            }
            for pid in pids {
                if let Some(pid) = Pid::from_raw(pid) {
                    // A task gone since the listing is not an error.
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            std::thread::yield_now();
        }
        false
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.kill_all() {
            return;
        }
        let deadline = std::time::Instant::now() + REMOVE_DEADLINE;
        loop {
            match fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    if std::time::Instant::now() > deadline {
                        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                        pending.push(std::mem::take(&mut self.dir));
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                _ => return,
            }
        }
    }
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        self.sweep();
    }
}
