//! Hostile trees and paths, one line each: a planted tree, one operation, the expected outcome.
//!
//! Every case asserts that the outside canary tree is byte-for-byte unchanged afterwards, that
//! nothing named `new` appeared outside, and, when the operation fails, that the roots are
//! unchanged too (a refused operation has no side effects).

use std::io::ErrorKind::{
    self, AlreadyExists, InvalidInput, IsADirectory, NotADirectory, NotFound, PermissionDenied,
};
use std::path::PathBuf;

use crate::common::{Backend, TestEnv, assert_same_tree, env, is_loop, snapshot};
use capfs::{CopyOptions, CreateDirectoryOptions, RemoveOptions, RenameOptions};

mod generated;
mod table;

/// The tree planted in `ws/` before the operation (on top of `ws/f`, `ws/sub/file` and
/// `ws/sub/inner/x`, which every case has). `{out}` in link texts stands for the outside tree.
#[derive(Clone, Copy, Debug)]
enum Plant {
    /// Only the common files.
    Plain,
    /// `l -> {out}/secret`
    AbsLink,
    /// `l -> ../outside/secret`
    RelLink,
    /// `d -> {out}`
    AbsDirLink,
    /// `d -> ../outside`
    RelDirLink,
    /// `l -> {out}/new` (dangling)
    DanglingOut,
    /// `l -> nonexistent` (dangling, inside)
    DanglingIn,
    /// `l -> l`
    SelfLoop,
    /// `a -> b`, `b -> a`
    PingPong,
    /// `c0 -> c1 -> … -> c{n-1} -> f`: `n` links before the file.
    Chain(usize),
    /// `l -> /proc/self/root{out}/secret`
    ProcLink,
    /// FIFO `p`
    Fifo,
    /// unix socket `s`
    Socket,
    /// FIFO `p` and `l -> p`
    FifoLink,
    /// directory `f.txt/` (named like a file)
    DirLikeFile,
    /// hard link `h` to `{out}/secret`
    HardLink,
    /// `up -> ..` (the directory holding `outside/`)
    UpLink,
    /// `r -> {ws}` (absolute link to the root itself)
    RootLink,
    /// `tree/` with `file`, `l -> {out}/secret`, `rel -> ../../outside/secret`
    TreeWithEscape,
    /// `inlink -> sub/file` (stays inside)
    InsideLink,
    /// `n -> outer/inner_ro` (the read-only root nested in `ws`), `here -> .`,
    /// `lf -> outer/inner_ro/file`, and
    /// `src/inner_ro/evil` (a tree whose copy into `ws/outer` would land in the nested root)
    NestedRo,
}

/// One operation; paths are relative to the directory holding the roots (`ws/l`), or absolute
/// host paths when they start with `/`.
#[derive(Clone, Copy, Debug)]
enum Op<'a> {
    Read(&'a str),
    Write(&'a str),
    Mkdir(&'a str, bool),
    Meta(&'a str),
    ReadDir(&'a str),
    /// Recursive, not forced (so `NotFound` shows).
    Remove(&'a str),
    /// Recursive.
    Copy(&'a str, &'a str),
    /// Without overwrite.
    Rename(&'a str, &'a str),
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Ok,
    Err(ErrorKind),
    /// Too many levels of symbolic links.
    Loop,
}

/// What must hold afterwards, beyond the checks every case makes.
#[derive(Clone, Copy, Debug)]
enum Then {
    Nothing,
    /// `base/rel` no longer exists (not even as a dangling link).
    Gone(&'static str),
    /// `base/rel` is a symlink whose text is the given one (`{out}` expanded).
    Link(&'static str, &'static str),
    /// `base/rel` is a regular file with these contents.
    File(&'static str, &'static [u8]),
    /// The read returned exactly these bytes.
    Read(&'static [u8]),
}

const INSIDE: &[u8] = b"inside content";

const WRITTEN: &[u8] = b"written by the test";

fn expand(env: &TestEnv, text: &str) -> PathBuf {
    PathBuf::from(
        text.replace("{out}", &env.outside.display().to_string())
            .replace("{ws}", &env.ws.to_string()),
    )
}

/// Plants the tree; returns a socket listener to keep alive when there is one.
fn plant(env: &TestEnv, plant: Plant) -> Option<std::os::unix::net::UnixListener> {
    env.mkfile("f", INSIDE);
    env.mkfile("sub/file", b"sub file");
    env.mkfile("sub/inner/x", b"x");
    let link = |rel: &str, text: &str| {
        env.symlink(rel, expand(env, text));
    };
    match plant {
        Plant::Plain => {}
        Plant::AbsLink => link("l", "{out}/secret"),
        Plant::RelLink => link("l", "../outside/secret"),
        Plant::AbsDirLink => link("d", "{out}"),
        Plant::RelDirLink => link("d", "../outside"),
        Plant::DanglingOut => link("l", "{out}/new"),
        Plant::DanglingIn => link("l", "nonexistent"),
        Plant::SelfLoop => link("l", "l"),
        Plant::PingPong => {
            link("a", "b");
            link("b", "a");
        }
        Plant::Chain(n) => {
            for i in 0..n {
                let next = if i + 1 == n {
                    "f".to_string()
                } else {
                    format!("c{}", i + 1)
                };
                link(&format!("c{i}"), &next);
            }
        }
        Plant::ProcLink => link("l", "/proc/self/root{out}/secret"),
        Plant::Fifo => {
            env.mkfifo("p");
        }
        Plant::Socket => return Some(env.mksocket("s")),
        Plant::FifoLink => {
            env.mkfifo("p");
            link("l", "p");
        }
        Plant::DirLikeFile => {
            env.mkdir("f.txt");
        }
        Plant::HardLink => {
            std::fs::hard_link(env.outside.join("secret"), env.ws_host("h")).unwrap();
        }
        Plant::UpLink => link("up", ".."),
        Plant::RootLink => link("r", "{ws}"),
        Plant::TreeWithEscape => {
            env.mkfile("tree/file", INSIDE);
            link("tree/l", "{out}/secret");
            link("tree/rel", "../../outside/secret");
        }
        Plant::InsideLink => link("inlink", "sub/file"),
        Plant::NestedRo => {
            link("n", "outer/inner_ro");
            link("here", ".");
            link("lf", "outer/inner_ro/file");
            env.mkfile("src/inner_ro/evil", b"evil");
        }
    }
    None
}

/// Runs `op`; the bytes of a successful read are returned.
async fn run(env: &TestEnv, op: Op<'_>) -> std::io::Result<Option<Vec<u8>>> {
    let fs = &env.fs;
    match op {
        Op::Read(p) => fs.read_file(&env.at(p)).await.map(Some),
        Op::Write(p) => fs
            .write_file(&env.at(p), WRITTEN.to_vec())
            .await
            .map(|()| None),
        Op::Mkdir(p, recursive) => fs
            .create_directory(
                &env.at(p),
                CreateDirectoryOptions::default().with_recursive(recursive),
            )
            .await
            .map(|()| None),
        Op::Meta(p) => fs.get_metadata(&env.at(p)).await.map(|_| None),
        Op::ReadDir(p) => fs.read_directory(&env.at(p)).await.map(|_| None),
        Op::Remove(p) => {
            let options = RemoveOptions::default()
                .with_recursive(true)
                .with_force(false);
            fs.remove(&env.at(p), options).await.map(|()| None)
        }
        Op::Copy(s, d) => {
            let options = CopyOptions::default().with_recursive(true);
            fs.copy(&env.at(s), &env.at(d), options)
                .await
                .map(|()| None)
        }
        Op::Rename(s, d) => {
            let options = RenameOptions::default().with_overwrite(false);
            fs.rename(&env.at(s), &env.at(d), options)
                .await
                .map(|()| None)
        }
    }
}

fn roots_snapshot(env: &TestEnv) -> Vec<std::collections::BTreeMap<PathBuf, crate::common::Entry>> {
    ["ws", "ws2", "ro"]
        .iter()
        .map(|r| snapshot(&env.host(r)))
        .collect()
}

async fn hostile_case(backend: Backend, plant_kind: Plant, op: Op<'_>, expect: Expect, then: Then) {
    let env = env(backend).await;
    let _socket = plant(&env, plant_kind);
    let outside_before = env.outside_snapshot();
    let roots_before = roots_snapshot(&env);

    let result = run(&env, op).await;

    env.assert_outside_unchanged(&outside_before);
    assert!(
        std::fs::symlink_metadata(env.outside.join("new")).is_err(),
        "{op:?} created outside/new"
    );
    let read = match (expect, result) {
        (Expect::Ok, Ok(read)) => read,
        (Expect::Err(kind), Err(e)) => {
            assert_eq!(e.kind(), kind, "{op:?}: {e}");
            None
        }
        (Expect::Loop, Err(e)) => {
            assert!(
                is_loop(&e),
                "{op:?}: expected a symlink loop error, got {e:?}"
            );
            None
        }
        (expect, result) => panic!("{op:?}: expected {expect:?}, got {result:?}"),
    };
    if !matches!(expect, Expect::Ok) {
        for (before, root) in roots_before.iter().zip(["ws", "ws2", "ro"]) {
            assert_same_tree(before, &snapshot(&env.host(root)), root);
        }
    }
    match then {
        Then::Nothing => {}
        Then::Gone(rel) => assert!(
            std::fs::symlink_metadata(env.host(rel)).is_err(),
            "{rel} still exists"
        ),
        Then::Link(rel, text) => {
            let path = env.host(rel);
            assert!(
                std::fs::symlink_metadata(&path)
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{rel} is not a symlink"
            );
            assert_eq!(std::fs::read_link(&path).unwrap(), expand(&env, text));
        }
        Then::File(rel, bytes) => {
            let path = env.host(rel);
            assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{rel}");
        }
        Then::Read(bytes) => assert_eq!(read.as_deref(), Some(bytes)),
    }
}
