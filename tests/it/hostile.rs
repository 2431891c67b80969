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
use test_case::test_case;

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
            .create_directory(&env.at(p), CreateDirectoryOptions { recursive })
            .await
            .map(|()| None),
        Op::Meta(p) => fs.get_metadata(&env.at(p)).await.map(|_| None),
        Op::ReadDir(p) => fs.read_directory(&env.at(p)).await.map(|_| None),
        Op::Remove(p) => {
            let options = RemoveOptions {
                recursive: true,
                force: false,
            };
            fs.remove(&env.at(p), options).await.map(|()| None)
        }
        Op::Copy(s, d) => {
            let options = CopyOptions { recursive: true };
            fs.copy(&env.at(s), &env.at(d), options)
                .await
                .map(|()| None)
        }
        Op::Rename(s, d) => {
            let options = RenameOptions { overwrite: false };
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

/// Expands the table into a module of tests for one backend; `hostile_table!(relay,
/// Backend::Relay)` is all it takes to run every case through a relay as well.
macro_rules! hostile_table {
    ($backend:ident, $remote:expr) => {
        mod $backend {
            use super::*;
            use test_case::test_case;

            // Lexical escapes and paths under no root.
            #[test_case(Plant::Plain, Op::Read("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot read")]
            #[test_case(Plant::Plain, Op::Write("ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot write")]
            #[test_case(Plant::Plain, Op::Write("ws/sub/../../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot write deep")]
            #[test_case(Plant::Plain, Op::Mkdir("ws/../outside/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot mkdir")]
            #[test_case(Plant::Plain, Op::Meta("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot metadata")]
            #[test_case(Plant::Plain, Op::ReadDir("ws/.."), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot read dir of parent")]
            #[test_case(Plant::Plain, Op::Remove("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot remove")]
            #[test_case(Plant::Plain, Op::Remove("ws/.."), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot remove parent of root")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot copy destination")]
            #[test_case(Plant::Plain, Op::Copy("ws/../outside", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dotdot copy source")]
            #[test_case(Plant::Plain, Op::Rename("ws/f", "ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot rename destination")]
            #[test_case(Plant::Plain, Op::Rename("ws/../outside/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dotdot rename source")]
            #[test_case(Plant::Plain, Op::Read("outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "no root read")]
            #[test_case(Plant::Plain, Op::Read("/etc/passwd"), Expect::Err(PermissionDenied), Then::Nothing ; "etc passwd read")]
            #[test_case(Plant::Plain, Op::Meta("/"), Expect::Err(PermissionDenied), Then::Nothing ; "slash metadata")]
            #[test_case(Plant::Plain, Op::Remove("/"), Expect::Err(PermissionDenied), Then::Nothing ; "slash remove")]
            #[test_case(Plant::Plain, Op::Write("wsx/f"), Expect::Err(PermissionDenied), Then::Nothing ; "root name prefix is not a root")]
            // Absolute symlink out of the root.
            #[test_case(Plant::AbsLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link read")]
            #[test_case(Plant::AbsLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Link("ws/l", "{out}/secret") ; "abs link write")]
            #[test_case(Plant::AbsLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link metadata")]
            #[test_case(Plant::AbsLink, Op::Remove("ws/l"), Expect::Ok, Then::Gone("ws/l") ; "abs link remove removes the link only")]
            #[test_case(Plant::AbsLink, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "{out}/secret") ; "abs link copy copies link text")]
            #[test_case(Plant::AbsLink, Op::Copy("ws/f", "ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link as copy destination")]
            #[test_case(Plant::AbsLink, Op::Rename("ws/l", "ws/moved"), Expect::Ok, Then::Link("ws/moved", "{out}/secret") ; "abs link rename moves the link")]
            #[test_case(Plant::AbsLink, Op::Mkdir("ws/l", false), Expect::Err(AlreadyExists), Then::Nothing ; "abs link mkdir")]
            // Relative symlink out of the root.
            #[test_case(Plant::RelLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link read")]
            #[test_case(Plant::RelLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link write")]
            #[test_case(Plant::RelLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link metadata")]
            #[test_case(Plant::RelLink, Op::Copy("ws/l", "ws2/l"), Expect::Ok, Then::Link("ws2/l", "../outside/secret") ; "rel link copy across roots keeps text")]
            // Intermediate directory symlink out of the root.
            #[test_case(Plant::AbsDirLink, Op::Read("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link read")]
            #[test_case(Plant::AbsDirLink, Op::Write("ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link write")]
            #[test_case(Plant::AbsDirLink, Op::Write("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link overwrite")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir recursive")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new", false), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new/deeper", true), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir deeper")]
            #[test_case(Plant::AbsDirLink, Op::Meta("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link metadata")]
            #[test_case(Plant::AbsDirLink, Op::ReadDir("ws/d"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link read dir")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link remove inside")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d/sub"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link remove dir inside")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d"), Expect::Ok, Then::Gone("ws/d") ; "dir link remove removes the link only")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link copy source")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d/sub", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link copy dir source")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/f", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link copy destination")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/sub", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link copy tree destination")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d", "ws/d2"), Expect::Ok, Then::Link("ws/d2", "{out}") ; "dir link copy copies the link")]
            #[test_case(Plant::AbsDirLink, Op::Rename("ws/f", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link rename destination")]
            #[test_case(Plant::AbsDirLink, Op::Rename("ws/d/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link rename source")]
            // Relative intermediate directory symlink.
            #[test_case(Plant::RelDirLink, Op::Read("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link read")]
            #[test_case(Plant::RelDirLink, Op::Write("ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link write")]
            #[test_case(Plant::RelDirLink, Op::Mkdir("ws/d/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link mkdir")]
            #[test_case(Plant::RelDirLink, Op::Remove("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link remove")]
            #[test_case(Plant::RelDirLink, Op::ReadDir("ws/d/sub"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link read dir")]
            // `up -> ..`
            #[test_case(Plant::UpLink, Op::Read("ws/up/outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "up link read")]
            #[test_case(Plant::UpLink, Op::Write("ws/up/outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "up link write")]
            #[test_case(Plant::UpLink, Op::Remove("ws/up/outside"), Expect::Err(PermissionDenied), Then::Nothing ; "up link remove outside tree")]
            #[test_case(Plant::UpLink, Op::Remove("ws/up/ws"), Expect::Err(PermissionDenied), Then::Nothing ; "up link remove own root")]
            #[test_case(Plant::UpLink, Op::Rename("ws/up/outside/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "up link rename")]
            // Dangling links.
            #[test_case(Plant::DanglingOut, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Link("ws/l", "{out}/new") ; "dangling out write creates nothing")]
            #[test_case(Plant::DanglingOut, Op::Copy("ws/f", "ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "dangling out copy destination")]
            #[test_case(Plant::DanglingOut, Op::Mkdir("ws/l", true), Expect::Err(AlreadyExists), Then::Nothing ; "dangling out mkdir recursive")]
            #[test_case(Plant::DanglingOut, Op::Mkdir("ws/l/x", true), Expect::Err(PermissionDenied), Then::Nothing ; "dangling out mkdir below")]
            #[test_case(Plant::DanglingIn, Op::Write("ws/l"), Expect::Ok, Then::File("ws/nonexistent", WRITTEN) ; "dangling in write creates target inside")]
            #[test_case(Plant::DanglingIn, Op::Read("ws/l"), Expect::Err(NotFound), Then::Nothing ; "dangling in read")]
            // Loops.
            #[test_case(Plant::SelfLoop, Op::Read("ws/l"), Expect::Loop, Then::Nothing ; "self loop read")]
            #[test_case(Plant::SelfLoop, Op::Write("ws/l"), Expect::Loop, Then::Nothing ; "self loop write")]
            #[test_case(Plant::SelfLoop, Op::Meta("ws/l"), Expect::Loop, Then::Nothing ; "self loop metadata")]
            #[test_case(Plant::SelfLoop, Op::ReadDir("ws/l"), Expect::Loop, Then::Nothing ; "self loop read dir")]
            #[test_case(Plant::SelfLoop, Op::Remove("ws/l"), Expect::Ok, Then::Gone("ws/l") ; "self loop remove")]
            #[test_case(Plant::SelfLoop, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "l") ; "self loop copy copies the link")]
            #[test_case(Plant::PingPong, Op::Read("ws/a"), Expect::Loop, Then::Nothing ; "ping pong read")]
            #[test_case(Plant::PingPong, Op::Write("ws/b"), Expect::Loop, Then::Nothing ; "ping pong write")]
            #[test_case(Plant::Chain(41), Op::Read("ws/c0"), Expect::Loop, Then::Nothing ; "chain of 41 read")]
            #[test_case(Plant::Chain(41), Op::Write("ws/c0"), Expect::Loop, Then::Nothing ; "chain of 41 write")]
            #[test_case(Plant::Chain(40), Op::Read("ws/c0"), Expect::Ok, Then::Read(INSIDE) ; "chain of 40 read")]
            #[test_case(Plant::Chain(40), Op::Write("ws/c0"), Expect::Ok, Then::File("ws/f", WRITTEN) ; "chain of 40 write")]
            // Magic links.
            #[test_case(Plant::ProcLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link read")]
            #[test_case(Plant::ProcLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link write")]
            #[test_case(Plant::ProcLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link metadata")]
            // Special files.
            #[test_case(Plant::Fifo, Op::Read("ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo read")]
            #[test_case(Plant::Fifo, Op::Copy("ws/p", "ws/copy"), Expect::Err(InvalidInput), Then::Gone("ws/copy") ; "fifo copy source")]
            #[test_case(Plant::Fifo, Op::Copy("ws/f", "ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo copy destination")]
            #[test_case(Plant::Fifo, Op::Write("ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo write")]
            #[test_case(Plant::Fifo, Op::Meta("ws/p"), Expect::Ok, Then::Nothing ; "fifo metadata")]
            #[test_case(Plant::Fifo, Op::Remove("ws/p"), Expect::Ok, Then::Gone("ws/p") ; "fifo remove")]
            #[test_case(Plant::Socket, Op::Read("ws/s"), Expect::Err(InvalidInput), Then::Nothing ; "socket read")]
            #[test_case(Plant::Socket, Op::Copy("ws/s", "ws/copy"), Expect::Err(InvalidInput), Then::Gone("ws/copy") ; "socket copy source")]
            #[test_case(Plant::FifoLink, Op::Read("ws/l"), Expect::Err(InvalidInput), Then::Nothing ; "link to fifo read")]
            #[test_case(Plant::FifoLink, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "p") ; "link to fifo copy copies the link")]
            #[test_case(Plant::DirLikeFile, Op::Read("ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file read")]
            #[test_case(Plant::DirLikeFile, Op::Write("ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file write")]
            #[test_case(Plant::DirLikeFile, Op::Copy("ws/f", "ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file copy destination")]
            #[test_case(Plant::Plain, Op::Read("ws/f/x"), Expect::Err(NotADirectory), Then::Nothing ; "file used as directory")]
            #[test_case(Plant::Plain, Op::ReadDir("ws/f"), Expect::Err(NotADirectory), Then::Nothing ; "read dir of file")]
            // Hard link to an outside file (planted by someone outside): a write replaces the link only.
            #[test_case(Plant::HardLink, Op::Write("ws/h"), Expect::Ok, Then::File("ws/h", WRITTEN) ; "hard link write keeps outside content")]
            #[test_case(Plant::HardLink, Op::Remove("ws/h"), Expect::Ok, Then::Gone("ws/h") ; "hard link remove")]
            // Read-only root.
            #[test_case(Plant::Plain, Op::Read("ro/file"), Expect::Ok, Then::Read(b"read-only content") ; "read only read")]
            #[test_case(Plant::Plain, Op::Write("ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "read only write")]
            #[test_case(Plant::Plain, Op::Write("ro/new"), Expect::Err(PermissionDenied), Then::Nothing ; "read only create")]
            #[test_case(Plant::Plain, Op::Mkdir("ro/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "read only mkdir")]
            #[test_case(Plant::Plain, Op::Remove("ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "read only remove")]
            #[test_case(Plant::Plain, Op::Remove("ro/dir"), Expect::Err(PermissionDenied), Then::Nothing ; "read only remove dir")]
            #[test_case(Plant::Plain, Op::Rename("ro/file", "ro/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "read only rename")]
            #[test_case(Plant::Plain, Op::Rename("ro/file", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "read only rename out")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ro/copy"), Expect::Err(PermissionDenied), Then::Nothing ; "read only copy destination")]
            #[test_case(Plant::Plain, Op::Copy("ws/sub", "ro/copy"), Expect::Err(PermissionDenied), Then::Nothing ; "read only copy tree destination")]
            #[test_case(Plant::Plain, Op::Copy("ro/dir", "ws/copy"), Expect::Ok, Then::File("ws/copy/inner", b"inner") ; "read only copy source")]
            // Roots themselves.
            #[test_case(Plant::Plain, Op::Remove("ws"), Expect::Err(PermissionDenied), Then::Nothing ; "remove root")]
            #[test_case(Plant::Plain, Op::Remove("ws/."), Expect::Err(PermissionDenied), Then::Nothing ; "remove root dot")]
            #[test_case(Plant::Plain, Op::Remove("ws/sub/.."), Expect::Err(PermissionDenied), Then::Nothing ; "remove root sub dotdot")]
            #[test_case(Plant::Plain, Op::Remove("ro"), Expect::Err(PermissionDenied), Then::Nothing ; "remove read only root")]
            #[test_case(Plant::Plain, Op::Rename("ws", "ws2/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename root")]
            #[test_case(Plant::Plain, Op::Rename("ws/f", "ws2"), Expect::Err(PermissionDenied), Then::Nothing ; "rename onto root")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ws"), Expect::Err(IsADirectory), Then::Nothing ; "copy file onto root")]
            #[test_case(Plant::RootLink, Op::Remove("ws/r"), Expect::Ok, Then::File("ws/f", INSIDE) ; "remove link to root removes the link only")]
            #[test_case(Plant::RootLink, Op::Read("ws/r/f"), Expect::Ok, Then::Nothing ; "absolute link to own root is followed inside it")]
            // Copy of a tree holding escaping links: the link text is copied, never the target's content.
            #[test_case(Plant::TreeWithEscape, Op::Copy("ws/tree", "ws/tree2"), Expect::Ok, Then::Link("ws/tree2/l", "{out}/secret") ; "copy tree with abs escaping link")]
            #[test_case(Plant::TreeWithEscape, Op::Copy("ws/tree", "ws2/tree"), Expect::Ok, Then::Link("ws2/tree/rel", "../../outside/secret") ; "copy tree with rel escaping link")]
            #[test_case(Plant::TreeWithEscape, Op::Remove("ws/tree"), Expect::Ok, Then::Gone("ws/tree") ; "remove tree with escaping links")]
            // Links that stay inside work.
            #[test_case(Plant::InsideLink, Op::Read("ws/inlink"), Expect::Ok, Then::Read(b"sub file") ; "inside link read")]
            #[test_case(Plant::InsideLink, Op::Write("ws/inlink"), Expect::Ok, Then::File("ws/sub/file", WRITTEN) ; "inside link write")]
            #[test_case(Plant::Plain, Op::Read("ws/sub/inner/../file"), Expect::Ok, Then::Read(b"sub file") ; "dotdot staying inside")]
            // A read-only root nested in the read-write one, reached through links in the latter.
            #[test_case(Plant::NestedRo, Op::Read("ws/n/file"), Expect::Ok, Then::Read(b"nested read-only") ; "nested ro read through link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/outer/inner_ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro write")]
            #[test_case(Plant::NestedRo, Op::Write("ws/n/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro write through link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/lf"), Expect::Err(PermissionDenied), Then::Link("ws/lf", "outer/inner_ro/file") ; "nested ro write through final link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/f", "ws/lf"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy onto final link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro create through link")]
            #[test_case(Plant::NestedRo, Op::Mkdir("ws/n/new", false), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro mkdir through link")]
            #[test_case(Plant::NestedRo, Op::Mkdir("ws/here/outer/inner_ro/a/b", true), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro mkdir recursive through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/n/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro remove through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/n/dir"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro remove dir through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/here/outer/inner_ro"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro root remove through alias")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/here/outer"), Expect::Err(PermissionDenied), Then::File("ws/outer/inner_ro/file", b"nested read-only") ; "remove dir holding nested root through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/n/file", "ws/stolen"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro rename out through link")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/f", "ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro rename in through link")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/here/outer/inner_ro", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "nested root rename through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/here/outer", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename dir holding nested root through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/outer", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename dir holding nested root")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/f", "ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy file in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/sub", "ws/n/copied"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy tree in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/here", "ws/n/copied"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy link in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/src", "ws/outer"), Expect::Err(PermissionDenied), Then::Nothing ; "copy tree merging into nested ro root")]
            #[tokio::test]
            async fn hostile(plant_kind: Plant, op: Op<'static>, expect: Expect, then: Then) {
                hostile_case($remote, plant_kind, op, expect, then).await;
            }
        }
    };
}

hostile_table!(local, Backend::Local);
hostile_table!(remote, Backend::Remote);
hostile_table!(relay, Backend::Relay);

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
            CopyOptions { recursive: true },
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
