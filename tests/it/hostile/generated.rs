//! Generated hostile operations, and tree copies into planted destinations.

use super::*;
use test_case::test_case;

/// Path components for generated paths: links out of the root, to itself, to its parent and to
/// the nested read-only root, plain names, and the dot components.
const TOKENS: [&str; 11] = [
    "d", "l", "up", "here", "n", "sub", "f", "new", "..", ".", "inner",
];

fn generated_path() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    proptest::collection::vec(proptest::sample::select(&TOKENS[..]), 0..5)
        .prop_map(|parts| format!("ws/{}", parts.join("/")))
}

fn generated_op() -> impl proptest::strategy::Strategy<Value = (u8, String, String)> {
    (0u8..8, generated_path(), generated_path())
}

/// Random sequences of operations on random paths through a tree full of escaping links never
/// change anything outside the read-write roots: not the canary tree, not the read-only roots.
#[test_case(Backend::Local ; "local")]
#[test_case(Backend::Remote ; "remote")]
#[test_case(Backend::Relay ; "relay")]
fn generated_operations_stay_confined(backend: Backend) {
    use proptest::test_runner::{Config, TestRunner};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(generated_op(), 1..8);
    runner
        .run(&strategy, |ops| {
            runtime.block_on(async {
                let env = env(backend).await;
                plant(&env, Plant::Plain);
                env.symlink("d", &env.outside);
                env.symlink("l", env.outside.join("secret"));
                env.symlink("up", "..");
                env.symlink("here", ".");
                env.symlink("n", "outer/inner_ro");
                let outside = env.outside_snapshot();
                let read_only = [snapshot(&env.host("ro")), snapshot(env.inner_ro.as_path())];
                for (kind, a, b) in &ops {
                    let (a, b) = (a.as_str(), b.as_str());
                    let op = match kind {
                        0 => Op::Read(a),
                        1 => Op::Write(a),
                        2 => Op::Mkdir(a, true),
                        3 => Op::Meta(a),
                        4 => Op::ReadDir(a),
                        5 => Op::Remove(a),
                        6 => Op::Copy(a, b),
                        _ => Op::Rename(a, b),
                    };
                    let _ = run(&env, op).await;
                    env.assert_outside_unchanged(&outside);
                    assert_same_tree(&read_only[0], &snapshot(&env.host("ro")), "ro");
                    assert_same_tree(&read_only[1], &snapshot(env.inner_ro.as_path()), "inner_ro");
                }
            });
            Ok(())
        })
        .unwrap();
}

/// A tree copied into an existing destination that holds planted links (a directory link out of
/// the root where the source has a directory, a file link where it has a file) never writes
/// through them.
#[test_case(Backend::Local ; "local")]
#[test_case(Backend::Remote ; "remote")]
#[test_case(Backend::Relay ; "relay")]
#[tokio::test]
async fn tree_copy_into_planted_destination_never_writes_through_links(backend: Backend) {
    let env = env(backend).await;
    env.mkfile("src/a", b"inside a");
    env.mkfile("src/inner/b", b"inside b");
    env.mkdir("dst");
    env.symlink("dst/inner", &env.outside);
    env.symlink("dst/a", env.outside.join("secret"));
    let before = env.outside_snapshot();
    let result = env
        .fs
        .copy(
            &env.p("src"),
            &env.p("dst"),
            CopyOptions::default().with_recursive(true),
        )
        .await;
    env.assert_outside_unchanged(&before);
    assert!(result.is_err(), "copied through a planted directory link");
    // The file link was replaced by a file, not written through.
    assert_eq!(std::fs::read(env.ws_host("dst/a")).unwrap(), b"inside a");
    assert!(
        std::fs::symlink_metadata(env.ws_host("dst/inner"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}
