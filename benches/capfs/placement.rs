//! The small-call round trip with the client and the server pinned to one CPU and to two.

use std::path::Path;
use std::time::Duration;

use capfs::AbsolutePathBuf;
use rustix::thread::CpuSet;

use crate::measure::{header, percentile, us};
use crate::raw::{
    canned_server, raw_capfs, raw_connect, raw_round_trips, trait_call, trait_round_trips,
};
use crate::servers::{Server, remote};
use crate::small::{PER_ROUND, ROUNDS, Shape};

/// Pins the calling thread to `cpus`; threads and processes it starts inherit the mask.
pub(crate) fn pin(cpus: &[usize]) {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set).expect("set the CPU affinity");
}

/// One call at a time with the client and the server pinned, on one CPU and on two: where the
/// scheduler leaves a client and its server thread decides the round trip on a virtual
/// machine (waking a sleeping CPU costs tens of microseconds), and unpinned it may keep them
/// together for one table and apart for the next. Pinned, capfs and the bare echo are compared
/// in the same placement.
pub(crate) fn placement_table(
    root: &Path,
    shapes: &[Shape],
    paths: &[AbsolutePathBuf; 3],
    current: &tokio::runtime::Runtime,
) {
    let allowed = rustix::thread::sched_getaffinity(None).expect("the CPU affinity");
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect();
    if cpus.len() < 2 {
        println!("\n(placement table left out: this process may use only one CPU)");
        return;
    }
    header(
        "Remote small calls one at a time, client and server pinned (median microseconds)",
        &[
            "placement",
            "call",
            "bare",
            "capfs, raw client",
            "raw / bare",
            "capfs, RemoteFileSystem",
            "RemoteFileSystem / bare",
        ],
    );
    for (placement, client_cpu, server_cpu) in [
        ("one CPU", cpus[0], cpus[0]),
        ("two CPUs", cpus[0], cpus[1]),
    ] {
        // The server process and the echo threads inherit the server's CPU.
        pin(&[server_cpu]);
        let server = Server::start(root);
        let echo_urls: Vec<String> = shapes
            .iter()
            .map(|s| canned_server(s.reply.clone()))
            .collect();
        pin(&[client_cpu]);
        let mut samples: Vec<[Vec<Duration>; 3]> =
            shapes.iter().map(|_| Default::default()).collect();
        current.block_on(async {
            let mut raw = raw_capfs(&server.url).await;
            let fs = remote(&server.url).await;
            let mut echoes = Vec::new();
            for url in &echo_urls {
                echoes.push(raw_connect(url).await);
            }
            for round in 0..=ROUNDS {
                let n = if round == 0 { 200 } else { PER_ROUND };
                for (index, shape) in shapes.iter().enumerate() {
                    let mut taken: [Vec<Duration>; 3] = Default::default();
                    let (request, len) = (&shape.request, shape.reply_len);
                    raw_round_trips(&mut echoes[index], request, len, n, &mut taken[0]).await;
                    raw_round_trips(&mut raw, request, len, n, &mut taken[1]).await;
                    trait_round_trips(n, &mut taken[2], || trait_call(&fs, index, &paths[index]))
                        .await;
                    if round > 0 {
                        for (all, new) in samples[index].iter_mut().zip(taken.iter_mut()) {
                            all.append(new);
                        }
                    }
                }
            }
        });
        for (shape, [bare, raw, remote]) in shapes.iter().zip(samples.iter_mut()) {
            for list in [&mut *bare, &mut *raw, &mut *remote] {
                list.sort();
            }
            let (b, r, t) = (
                us(percentile(bare, 0.5)),
                us(percentile(raw, 0.5)),
                us(percentile(remote, 0.5)),
            );
            println!(
                "| {placement} | {} | {b:.1} | {r:.1} | {:.2} | {t:.1} | {:.2} |",
                shape.name,
                r / b,
                t / b
            );
        }
        drop(server);
        pin(&cpus);
    }
    println!(
        "\nThe client (this process's thread, one current_thread runtime) is pinned to CPU {}; the \
         server (`capfs serve`, every thread) and the bare echo to CPU {} or {}.",
        cpus[0], cpus[0], cpus[1]
    );
}
