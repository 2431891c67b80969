//! The capfs servers the sections measure: the binary on port 0 and an in-process server on a
//! work-stealing runtime.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

use crate::measure::{cpu_of, multi_thread};

/// A running `capfs serve` over `root`, killed when dropped.
pub(crate) struct Server {
    pub(crate) child: std::process::Child,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start(root: &Path) -> Self {
        Self::start_with_args(root, &[])
    }

    /// Starts a server with extra arguments.
    pub(crate) fn start_with_args(root: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capfs"))
            .arg("serve")
            .arg("--root")
            .arg(root)
            .args(args)
            .env("RUST_LOG", "capfs=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn capfs serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("read URL");
        Self {
            child,
            url: line.trim().to_string(),
        }
    }

    /// A field of the server's `/proc/PID/status` in KiB (`VmRSS:` now, `VmHWM:` its peak).
    pub(crate) fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Server {
    /// User + system CPU time the server has used so far.
    pub(crate) fn cpu(&self) -> Duration {
        cpu_of(self.child.id())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) const WORK_STEALING: &str = "work-stealing runtime (in process)";

/// A capfs server over `root` on a multi_thread runtime of its own thread, in this process:
/// connections on the caller's runtime (`connection_threads` 0), as a library user may run it.
/// Returns its URL; it lives as long as the process.
pub(crate) fn work_stealing_server(root: &Path) -> String {
    let sandbox = Sandbox::new().with_root(root, Access::ReadWrite).unwrap();
    let fs: Arc<dyn ExecutorFileSystem> = Arc::new(LocalFileSystem::new(sandbox));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        multi_thread().block_on(async move {
            let config = capfs_wire::server::ServerConfig::default();
            let server = capfs_wire::server::Server::bind(fs, config).await.unwrap();
            url_tx.send(server.url().to_string()).unwrap();
            server.run_until(std::future::pending()).await.unwrap();
        });
    });
    url_rx.recv().unwrap()
}

pub(crate) async fn remote(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .expect("connect")
}
