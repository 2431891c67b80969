//! Race tests: an attacker thread keeps exchanging a directory inside the tree being worked on
//! with a symlink to an outside copy of the same tree (`renameat2(RENAME_EXCHANGE)`), while the
//! operation runs again and again. The outside canary tree must stay byte-for-byte unchanged, and
//! no outside content may show up inside the sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{CANARY, TestEnv, assert_no_outside_content, env};
use capfs::{CopyOptions, RemoveOptions};
use rustix::fs::{CWD, RenameFlags};
use test_case::test_case;

/// How long each race runs, and the most rounds it runs (whichever ends first).
const RACE_TIME: Duration = Duration::from_millis(2500);
const MAX_ROUNDS: usize = 20_000;

/// The files of the tree under attack, relative to its top; directories are created as needed.
const TREE: [&str; 5] = ["f", "g", "deeper/h", "deeper/deepest/i", "deeper/deepest/j"];

/// Writes the tree below `dir`, each file holding `tag` and its own name.
fn write_tree(dir: &Path, tag: &str) {
    for rel in TREE {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{tag} {rel}\n")).unwrap();
    }
}

/// Plants `ws/v{round}`: a file `f0`, the directory `sub/` (the tree with inside content), and
/// `swap -> outside/victim`, the same tree with canary content.
fn plant_round(env: &TestEnv, round: usize) -> PathBuf {
    let v = env.ws_host(&format!("v{round}"));
    std::fs::create_dir(&v).unwrap();
    std::fs::write(v.join("f0"), b"inside f0").unwrap();
    write_tree(&v.join("sub"), "inside");
    std::os::unix::fs::symlink(env.outside.join("victim"), v.join("swap")).unwrap();
    v
}

/// The attacker: exchanges `ws/v{round}/sub` and `ws/v{round}/swap` as fast as it can, putting
/// the link back whenever the operation removed it. Returns how many exchanges succeeded.
struct Attacker {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl Attacker {
    fn start(env: &TestEnv, round: Arc<AtomicUsize>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ws = env.ws.as_path().to_path_buf();
        let target = env.outside.join("victim");
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                let v = ws.join(format!("v{}", round.load(Ordering::Relaxed)));
                let (sub, swap) = (v.join("sub"), v.join("swap"));
                match rustix::fs::renameat_with(CWD, &sub, CWD, &swap, RenameFlags::EXCHANGE) {
                    Ok(()) => swaps += 1,
                    Err(_) => {
                        let _ = rustix::fs::symlinkat(&target, CWD, &swap);
                    }
                }
            }
            swaps
        });
        Self { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("attacker thread")
    }
}

/// Sets up the outside copy of the tree, then runs `round_fn` for each round while the attacker
/// runs; checks the canary tree afterwards. Returns (rounds, rounds that succeeded).
async fn race<F, Fut>(env: &TestEnv, mut round_fn: F) -> (usize, usize)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    write_tree(&env.outside.join("victim"), CANARY);
    let before = env.outside_snapshot();
    let round = Arc::new(AtomicUsize::new(0));
    plant_round(env, 0);
    let attacker = Attacker::start(env, Arc::clone(&round));
    let start = Instant::now();
    let (mut rounds, mut successes) = (0, 0);
    while rounds < MAX_ROUNDS && start.elapsed() < RACE_TIME {
        if rounds > 0 {
            plant_round(env, rounds);
            round.store(rounds, Ordering::Relaxed);
        }
        successes += usize::from(round_fn(rounds).await);
        rounds += 1;
    }
    let swaps = attacker.finish();
    env.assert_outside_unchanged(&before);
    eprintln!("rounds {rounds} successes {successes} swaps {swaps}");
    assert!(swaps > 0, "the attacker never managed an exchange");
    (rounds, successes)
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_remove_under_exchange_attack(remote: bool) {
    let env = env(remote).await;
    let options = RemoveOptions::default()
        .with_recursive(true)
        .with_force(false);
    let (rounds, removed) = race(&env, |round| {
        let (fs, path) = (Arc::clone(&env.fs), env.p(&format!("v{round}")));
        async move { fs.remove(&path, options).await.is_ok() }
    })
    .await;
    assert!(removed > 0, "no remove succeeded in {rounds} rounds");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_copy_under_exchange_attack(remote: bool) {
    let env = env(remote).await;
    let (rounds, copied) = race(&env, |round| {
        let fs = Arc::clone(&env.fs);
        let (src, dst) = (env.p(&format!("v{round}")), env.p(&format!("dst{round}")));
        async move {
            fs.copy(&src, &dst, CopyOptions::default().with_recursive(true))
                .await
                .is_ok()
        }
    })
    .await;
    assert!(copied > 0, "no copy succeeded in {rounds} rounds");
    // The copies (and the attacked trees) hold links to the outside copy, never its content.
    assert_no_outside_content(env.ws.as_path());
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_copy_and_write_under_parent_exchange(remote: bool) {
    let env = env(remote).await;
    let (rounds, done) = race(&env, |round| {
        let fs = Arc::clone(&env.fs);
        let src = env.p(&format!("v{round}/sub/f"));
        let out = env.p(&format!("out{round}"));
        let f0 = env.p(&format!("v{round}/f0"));
        let into_sub = env.p(&format!("v{round}/sub/copied"));
        let written = env.p(&format!("v{round}/sub/written"));
        let out_host = env.ws_host(&format!("out{round}"));
        async move {
            let copied = fs.copy(&src, &out, CopyOptions::default()).await;
            if copied.is_ok() {
                assert_eq!(std::fs::read(&out_host).unwrap(), b"inside f\n");
            }
            let copied_in = fs.copy(&f0, &into_sub, CopyOptions::default()).await;
            let wrote = fs.write_file(&written, b"inside write".to_vec()).await;
            copied.is_ok() && copied_in.is_ok() && wrote.is_ok()
        }
    })
    .await;
    assert!(done > 0, "no round succeeded in {rounds} rounds");
    assert_no_outside_content(env.ws.as_path());
}
