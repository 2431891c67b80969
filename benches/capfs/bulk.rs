//! Bulk: 256 MiB through the capfs binary against sftp-server, beside the floors of a copy
//! (raw TCP, a file through loopback TCP and through a Unix socket pair, `cp`).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream as StdTcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::{Measured, cpu_of, header, mbps, multi_thread, random_bytes, run_measured};
use crate::servers::Server;

pub(crate) const BULK_BYTES: usize = 256 << 20;
pub(crate) const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";

/// `get` and `put` should each be at least this many times as fast as sftp-server's (issue #32).
const SFTP_TARGET: f64 = 1.3;

/// How much the floor copies read and write at a time (what `capfs` sends in a data frame).
const FLOOR_PIECE: usize = 256 * 1024;

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

/// Runs `capfs --remote-command "capfs serve --listen stdio --root WS" args...`: the client
/// starts its own server on a Unix socket pair, as `sftp -D` does. The client kills the server
/// at its end without waiting for it, so GNU time's CPU and memory are the client's alone.
fn transfer_over_stdio(ws: &Path, args: &[&str]) -> Measured {
    let bin = env!("CARGO_BIN_EXE_capfs");
    let command = format!(
        "RUST_LOG=capfs=warn exec '{bin}' serve --listen stdio --root '{}'",
        ws.display()
    );
    let mut full = vec!["--remote-command", &command];
    full.extend_from_slice(args);
    run_measured(bin, &full, None)
}

/// One round of `capfs args...` over stdio into `row`: `destination` is cleared first and must
/// then hold what `source` holds.
fn stdio_round(row: &mut BulkRow, ws: &Path, args: &[&str], source: &Path, destination: &Path) {
    settle(destination);
    let t = transfer_over_stdio(ws, args);
    row.record(t.elapsed, None, None, Some(t.peak_kib));
    assert!(
        same_contents(source, destination),
        "capfs {} over stdio corrupted",
        args[0]
    );
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

/// Copies the file `from` to `to` through `pair`, two connected stream sockets: a thread reads
/// the file and writes one end, this one reads the other end and writes the file, with no
/// framing, masking or checks: the floor of a `get` or `put` over that transport. Returns the
/// wall time and the CPU time this process took meanwhile (both ends are in it).
fn file_through<S>(pair: (S, S), from: &Path, to: &Path) -> (Duration, Duration)
where
    S: Read + Write + Send + 'static,
{
    let (mut sending, mut receiving) = pair;
    let cpu_before = cpu_of("self");
    let started = Instant::now();
    let from = from.to_path_buf();
    let sender = std::thread::spawn(move || {
        let mut file = File::open(from).unwrap();
        let mut piece = vec![0u8; FLOOR_PIECE];
        loop {
            let n = file.read(&mut piece).unwrap();
            if n == 0 {
                break;
            }
            sending.write_all(&piece[..n]).unwrap();
        }
        // Dropping `sending` ends the stream.
    });
    let mut file = File::create(to).unwrap();
    let mut piece = vec![0u8; FLOOR_PIECE];
    let mut total = 0;
    loop {
        let n = receiving.read(&mut piece).unwrap();
        if n == 0 {
            break;
        }
        file.write_all(&piece[..n]).unwrap();
        total += n;
    }
    drop(file);
    sender.join().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(total, BULK_BYTES, "the floor copy lost bytes");
    (elapsed, cpu_of("self").saturating_sub(cpu_before))
}

/// Two ends of a loopback TCP connection.
fn tcp_pair() -> (StdTcpStream, StdTcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let connecting = StdTcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    (connecting, accepted)
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
        "file through loopback TCP",
        "file through a Unix socket pair",
        "sftp-server get",
        "capfs get",
        "capfs get, stdio",
        "sftp-server put",
        "capfs put",
        "capfs put, stdio",
    ];
    let [
        raw_tcp,
        cp,
        file_tcp,
        file_unix,
        sftp_get,
        capfs_get,
        stdio_get,
        sftp_put,
        capfs_put,
        stdio_put,
    ] = std::array::from_fn(|i| i);
    let mut rows: Vec<BulkRow> = names.iter().map(|_| BulkRow::default()).collect();
    let sftp_args = ["-q", "-D", SFTP_SERVER, "-b", "-"];
    let (src, back, put) = (
        local_src.to_str().unwrap(),
        local_back.to_str().unwrap(),
        remote_put.to_str().unwrap(),
    );
    let data = remote_data.to_str().unwrap();
    for _ in 0..3 {
        rows[raw_tcp].record(runtime.block_on(raw_tcp_copy(BULK_BYTES)), None, None, None);

        settle(&local_back);
        let copied = run_measured("cp", &[src, back], None);
        rows[cp].record(copied.elapsed, Some(copied.cpu), None, None);

        settle(&local_back);
        let (elapsed, cpu) = file_through(tcp_pair(), &local_src, &local_back);
        rows[file_tcp].record(elapsed, Some(cpu), None, None);

        settle(&local_back);
        let (elapsed, cpu) = file_through(UnixStream::pair().unwrap(), &local_src, &local_back);
        rows[file_unix].record(elapsed, Some(cpu), None, None);

        if has_sftp {
            settle(&local_back);
            let batch = format!("get {data} {back}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[sftp_get].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&local_back);
        let t = transfer(&ws, &["get", data, back]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[capfs_get].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &local_back),
            "capfs get corrupted"
        );

        stdio_round(
            &mut rows[stdio_get],
            &ws,
            &["get", data, back],
            &local_src,
            &local_back,
        );

        if has_sftp {
            settle(&remote_put);
            let batch = format!("put {src} {put}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[sftp_put].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&remote_put);
        let t = transfer(&ws, &["put", src, put]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[capfs_put].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &remote_put),
            "capfs put corrupted"
        );

        stdio_round(
            &mut rows[stdio_put],
            &ws,
            &["put", src, put],
            &local_src,
            &remote_put,
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
            i if i == capfs_get || i == stdio_get => ratio(&rows[sftp_get], row),
            i if i == capfs_put || i == stdio_put => ratio(&rows[sftp_put], row),
            i if i == sftp_get || i == sftp_put => "1.00x".to_string(),
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
            ratio(&rows[cp], row),
            ratio(&rows[raw_tcp], row),
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
         sftp: `sftp -q -D {SFTP_SERVER} -b -` (its sftp-server on a Unix socket pair, no \
         encryption); capfs: the release binary against a fresh `capfs serve` per transfer, over \
         loopback TCP, or (stdio) started by the client with `--remote-command` on a Unix socket \
         pair as sftp starts its server. The two `file through` rows are the floors: the same \
         file read, sent through the transport and written, by two threads of this process, with \
         no protocol. \
         CPU: the least user + system time of the 3 (sftp's includes its server; capfs's over \
         TCP adds the server's; capfs's over stdio is not measured, its server being killed \
         unwaited; a floor's is both its threads')."
    );
    if rows[sftp_get].times.is_empty() {
        return;
    }
    let contenders = [
        ("get", "over TCP", sftp_get, capfs_get, file_tcp),
        ("get", "over stdio", sftp_get, stdio_get, file_unix),
        ("put", "over TCP", sftp_put, capfs_put, file_tcp),
        ("put", "over stdio", sftp_put, stdio_put, file_unix),
    ];
    for (what, how, sftp, capfs, floor) in contenders {
        let sftp_best = rows[sftp].best().as_secs_f64();
        let speed = sftp_best / rows[capfs].best().as_secs_f64();
        let verdict = if speed >= SFTP_TARGET {
            "met"
        } else {
            "NOT met"
        };
        println!(
            "capfs {what} {how} / sftp-server {what}: {speed:.2}x (target >= {SFTP_TARGET}x: \
             {verdict}); the target asks for at most {:.3} s, where the file alone took {:.3} s \
             through the same transport (best of 3)",
            sftp_best / SFTP_TARGET,
            rows[floor].best().as_secs_f64(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
