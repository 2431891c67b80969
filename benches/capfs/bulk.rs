//! Bulk: 256 MiB through the capfs binary against sftp-server, raw TCP and cp.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::{Measured, header, mbps, multi_thread, random_bytes, run_measured};
use crate::servers::Server;

pub(crate) const BULK_BYTES: usize = 256 << 20;
pub(crate) const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";

/// One contender's timings, CPU time and peak memory over the rounds.
#[derive(Default)]
pub(crate) struct BulkRow {
    pub(crate) times: Vec<Duration>,
    pub(crate) cpu: Vec<Duration>,
    pub(crate) server_above_idle_kib: Option<u64>,
    pub(crate) client_peak_kib: Option<u64>,
}

impl BulkRow {
    pub(crate) fn record(
        &mut self,
        elapsed: Duration,
        cpu: Option<Duration>,
        server: Option<u64>,
        client: Option<u64>,
    ) {
        self.times.push(elapsed);
        self.cpu.extend(cpu);
        if let Some(s) = server {
            self.server_above_idle_kib = Some(self.server_above_idle_kib.unwrap_or(0).max(s));
        }
        if let Some(c) = client {
            self.client_peak_kib = Some(self.client_peak_kib.unwrap_or(0).max(c));
        }
    }

    pub(crate) fn best(&self) -> Duration {
        self.times.iter().copied().min().unwrap_or(Duration::MAX)
    }

    pub(crate) fn worst(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or(Duration::MAX)
    }
}

/// What one transfer against a fresh server cost: the client as GNU time saw it, the server's
/// CPU time and its peak RSS above its idle RSS, in KiB.
pub(crate) struct Transfer {
    pub(crate) client: Measured,
    pub(crate) server_cpu: Duration,
    pub(crate) server_above_idle_kib: u64,
}

/// Runs `capfs --remote URL args...` against a fresh `capfs serve` over `ws`.
pub(crate) fn transfer(ws: &Path, args: &[&str]) -> Transfer {
    let server = Server::start(ws);
    let (idle, cpu_before) = (server.memory_kib("VmRSS:"), server.cpu());
    let mut full = vec!["--remote", &server.url];
    full.extend_from_slice(args);
    let client = run_measured(env!("CARGO_BIN_EXE_capfs"), &full, None);
    let server_cpu = server.cpu().saturating_sub(cpu_before);
    let peak = server.memory_kib("VmHWM:");
    Transfer {
        client,
        server_cpu,
        server_above_idle_kib: peak.saturating_sub(idle),
    }
}

pub(crate) async fn raw_tcp_copy(bytes: usize) -> Duration {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0;
        while total < bytes {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0);
            total += n;
        }
    });
    let started = Instant::now();
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let chunk = vec![7u8; 256 * 1024];
    let mut sent = 0;
    while sent < bytes {
        socket.write_all(&chunk).await.unwrap();
        sent += chunk.len();
    }
    receiver.await.unwrap();
    started.elapsed()
}

/// Removes a transfer's destination and writes every dirty page back, so that no transfer
/// runs beside the write-back of the one before (a 256 MiB write leaves that much dirty).
pub(crate) fn settle(destination: &Path) {
    let _ = std::fs::remove_file(destination);
    rustix::fs::sync();
}

pub(crate) fn same_contents(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

pub(crate) fn bulk_section(scratch: &Path) {
    let ws = scratch.join("bulk-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let local_src = scratch.join("src.bin");
    std::fs::write(&local_src, random_bytes(BULK_BYTES)).unwrap();
    let remote_data = ws.join("data.bin");
    std::fs::copy(&local_src, &remote_data).unwrap();
    let local_back = scratch.join("back.bin");
    let remote_put = ws.join("put.bin");
    let has_sftp = Path::new(SFTP_SERVER).exists()
        && Command::new("sftp")
            .arg("-V")
            .stderr(Stdio::null())
            .status()
            .is_ok();
    let runtime = multi_thread();
    let names = [
        "raw loopback TCP copy",
        "local cp",
        "sftp-server get",
        "capfs get",
        "sftp-server put",
        "capfs put",
    ];
    let mut rows: Vec<BulkRow> = names.iter().map(|_| BulkRow::default()).collect();
    let sftp_args = ["-q", "-D", SFTP_SERVER, "-b", "-"];
    let (src, back, put) = (
        local_src.to_str().unwrap(),
        local_back.to_str().unwrap(),
        remote_put.to_str().unwrap(),
    );
    let data = remote_data.to_str().unwrap();
    for _ in 0..3 {
        rows[0].record(runtime.block_on(raw_tcp_copy(BULK_BYTES)), None, None, None);

        settle(&local_back);
        let cp = run_measured("cp", &[src, back], None);
        rows[1].record(cp.elapsed, Some(cp.cpu), None, None);

        if has_sftp {
            settle(&local_back);
            let batch = format!("get {data} {back}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[2].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&local_back);
        let t = transfer(&ws, &["get", data, back]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[3].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &local_back),
            "capfs get corrupted"
        );

        if has_sftp {
            settle(&remote_put);
            let batch = format!("put {src} {put}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[4].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&remote_put);
        let t = transfer(&ws, &["put", src, put]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[5].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &remote_put),
            "capfs put corrupted"
        );
    }

    header(
        "Remote bulk: 256 MiB over loopback, alternated, best of 3 (range over the 3)",
        &[
            "transfer",
            "seconds",
            "MB/s",
            "vs sftp-server",
            "vs local cp",
            "vs raw TCP",
            "CPU s, both ends",
            "server peak RSS above idle",
            "client peak RSS",
        ],
    );
    let ratio = |base: &BulkRow, row: &BulkRow| {
        if base.times.is_empty() {
            return "-".to_string();
        }
        let (b, r) = (base.best().as_secs_f64(), row.best().as_secs_f64());
        format!("{:.2}x", b / r)
    };
    for (index, (name, row)) in names.iter().zip(&rows).enumerate() {
        if row.times.is_empty() {
            println!("| {name} | skipped: {SFTP_SERVER} or sftp not installed | | | | | | | |");
            continue;
        }
        let versus_sftp = match index {
            3 => ratio(&rows[2], row),
            5 => ratio(&rows[4], row),
            2 | 4 => "1.00x".to_string(),
            _ => "-".to_string(),
        };
        let mib =
            |v: Option<u64>| v.map_or("-".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        println!(
            "| {name} | {:.3} ({:.3}-{:.3}) | {:.0} | {versus_sftp} | {} | {} | {} | {} | {} |",
            row.best().as_secs_f64(),
            row.best().as_secs_f64(),
            row.worst().as_secs_f64(),
            mbps(BULK_BYTES, row.best()),
            ratio(&rows[1], row),
            ratio(&rows[0], row),
            row.cpu
                .iter()
                .min()
                .map_or("-".to_string(), |c| format!("{:.2}", c.as_secs_f64())),
            mib(row.server_above_idle_kib),
            mib(row.client_peak_kib),
        );
    }
    println!(
        "\nspeed ratios: the baseline's time over the row's (above 1 is faster than the baseline). \
         sftp: `sftp -q -D {SFTP_SERVER} -b -` (a pipe, no encryption); capfs: the release \
         binary against a fresh `capfs serve` per transfer. CPU: the least user + system time of the \
         3 (sftp's includes its sftp-server; capfs's adds the server's); peak RSS of the client \
         from GNU time."
    );
}

// ---------------------------------------------------------------------------------------------
