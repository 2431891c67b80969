//! The figures of the process bench: medians per server, the ratios, and whether the targets
//! are met. Printed only: a bench never fails on a time.

use std::time::Duration;

use super::{Figures, median};

/// One row of the table: its label and how it picks a median from a server's figures.
type Row = (&'static str, fn(&Figures) -> Duration);

/// The sandbox may cost at most this much of an unconfined start.
const SANDBOX_TARGET: f64 = 1.2;
/// A confined capfs start should take at most this share of codex's confined start.
const CODEX_TARGET: f64 = 0.5;

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub(super) fn print(names: &[&str], figures: &[Figures], starts: usize, rounds: usize) {
    println!(
        "process bench: {starts} starts of each command per round, {rounds} rounds, servers alternated; medians"
    );
    let rows: [Row; 4] = [
        ("true: start to reply", |f| median(f.true_reply.clone())),
        ("true: start to closed", |f| median(f.true_closed.clone())),
        ("cat 4 KiB: start to first output", |f| {
            median(f.cat_first.clone())
        }),
        ("cat 4 KiB: start to closed", |f| {
            median(f.cat_closed.clone())
        }),
    ];
    let width = 36;
    print!("{:width$}", "");
    for name in names {
        print!("{name:>24}");
    }
    println!();
    for (label, pick) in &rows {
        print!("{label:width$}");
        for f in figures {
            print!("{:>24}", micros(pick(f)));
        }
        println!();
    }
    print!("{:width$}", "256 MiB of output (MB/s)");
    for f in figures {
        let mut rates = f.mb_per_s.clone();
        rates.sort_by(f64::total_cmp);
        print!("{:>24.0}", rates[rates.len() / 2]);
    }
    println!();

    let find = |name: &str| names.iter().position(|n| *n == name).map(|i| &figures[i]);
    let closed = |f: &Figures| median(f.true_closed.clone());
    let (Some(confined), Some(unconfined)) = (find("capfs confined"), find("capfs unconfined"))
    else {
        return;
    };
    let sandbox = ratio(closed(confined), closed(unconfined));
    println!(
        "capfs confined / capfs unconfined, `true` start to closed: {sandbox:.2}x (target <= {SANDBOX_TARGET}x: {})",
        if sandbox <= SANDBOX_TARGET {
            "met"
        } else {
            "NOT met"
        }
    );
    let cat = ratio(
        median(confined.cat_closed.clone()),
        median(unconfined.cat_closed.clone()),
    );
    println!("capfs confined / capfs unconfined, `cat` start to closed: {cat:.2}x");
    if let Some(codex) = find("codex workspace-write") {
        let against = ratio(closed(confined), closed(codex));
        println!(
            "capfs confined / codex workspace-write, `true` start to closed: {against:.2}x (target <= {CODEX_TARGET}x: {})",
            if against <= CODEX_TARGET {
                "met"
            } else {
                "NOT met"
            }
        );
        let cat = ratio(
            median(confined.cat_closed.clone()),
            median(codex.cat_closed.clone()),
        );
        println!("capfs confined / codex workspace-write, `cat` start to closed: {cat:.2}x");
    }
    if let (Some(codex), Some(bare)) = (find("codex workspace-write"), find("codex no sandbox")) {
        println!(
            "codex workspace-write / codex no sandbox, `true` start to closed: {:.2}x",
            ratio(closed(codex), closed(bare))
        );
    }
}
