//! Arbitrary operation plans over hostile path tokens, run on the local backend in a temporary
//! sandbox next to an outside canary tree.
//!
//! Layout (one temporary directory, reused; the root's contents are rebuilt for every input):
//! `root/` is the sandbox root; `outside/` and `secret.txt` beside it are the canary, and so is
//! `root/ro/`, a read-only root nested in the read-write one (created once, never reset). The root
//! starts with files, a directory, a FIFO and symlinks that point inside and out; plans may add more
//! links from a fixed list of texts (none of which reach further up than the temporary
//! directory, so a bug cannot touch anything but the canary).
//!
//! Oracle: after every operation the canary (names, types, contents, link texts, modes,
//! mtimes) is unchanged and the root is still a directory; an operation on a path that is
//! lexically outside the root fails (`PermissionDenied` for one-path operations); no bytes read
//! and no listed name carry the canary's token.

#![no_main]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoveOptions, RenameOptions, Sandbox,
};
use libfuzzer_sys::fuzz_target;

const TOKEN: &[u8] = b"CANARY-TOKEN-4e1b";
const NAMES: [&str; 9] = [
    "a", "b", "dir", "up", "abs_out", "abs_in", "fifo", "ro", "keep.txt",
];

struct Fixture {
    top: tempfile::TempDir,
    root: PathBuf,
    fs: LocalFileSystem,
    runtime: tokio::runtime::Runtime,
    canary: (Snapshot, Snapshot),
}

type Snapshot = BTreeMap<PathBuf, (u32, u64, i64, Vec<u8>)>;

/// Everything below `top` except the subtree `skip`.
fn snapshot(top: &Path, skip: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut todo = vec![top.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("canary entry");
        let content = if meta.file_type().is_symlink() {
            std::fs::read_link(&path)
                .expect("link")
                .into_os_string()
                .into_vec()
        } else if meta.is_file() {
            std::fs::read(&path).expect("canary file")
        } else {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&path).expect("canary dir") {
                let entry = entry.expect("entry");
                if entry.path() == skip {
                    continue;
                }
                names.extend_from_slice(entry.file_name().as_bytes());
                names.push(b'/');
                todo.push(entry.path());
            }
            names
        };
        let mtime = if path == top || path == skip {
            0
        } else {
            meta.mtime_nsec() + meta.mtime() * 1_000_000_000
        };
        out.insert(path, (meta.mode(), meta.len(), mtime, content));
    }
    out
}

/// What no operation may change: the temporary directory except the root, and the read-only
/// root nested in the root.
fn canary(top: &Path, root: &Path) -> (Snapshot, Snapshot) {
    (
        snapshot(top, root),
        snapshot(&root.join("ro"), Path::new("")),
    )
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let top = tempfile::Builder::new()
            .prefix("capfs-fuzz-fs-ops")
            .tempdir()
            .expect("temp dir");
        let root = top.path().join("root");
        std::fs::create_dir(&root).expect("root");
        std::fs::create_dir_all(top.path().join("outside/sub")).expect("canary dir");
        std::fs::write(top.path().join("outside/secret.txt"), TOKEN).expect("canary file");
        std::fs::write(top.path().join("outside/sub/deep.txt"), TOKEN).expect("canary file");
        std::fs::write(top.path().join("secret.txt"), TOKEN).expect("canary file");
        std::fs::create_dir_all(root.join("ro/rosub")).expect("read-only root");
        std::fs::write(root.join("ro/keep.txt"), b"read-only").expect("read-only root");
        std::fs::write(root.join("ro/rosub/ro.txt"), b"read-only").expect("read-only root");
        let sandbox = Sandbox::new()
            .with_root(&root, Access::ReadWrite)
            .and_then(|s| s.with_root(root.join("ro"), Access::ReadOnly))
            .expect("sandbox");
        let root = sandbox.roots()[0].path().as_path().to_path_buf();
        let canary = canary(top.path(), &root);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        Fixture {
            top,
            root,
            fs: LocalFileSystem::new(sandbox),
            runtime,
            canary,
        }
    })
}

/// The link texts a plan may plant; every escape stays within the temporary directory.
#[derive(Arbitrary, Clone, Copy, Debug)]
enum LinkTarget {
    Outside,
    OutsideFile,
    Parent,
    ParentThenRoot,
    AbsoluteOutside,
    AbsoluteOutsideFile,
    AbsoluteInside,
    AbsoluteRoot,
    Dot,
    ReadOnlyRoot,
    AbsoluteReadOnlyFile,
    Sibling,
    Dangling,
    SelfLink,
    EscapeThroughDir,
}

impl LinkTarget {
    fn text(self, fixture: &Fixture, name: &str) -> PathBuf {
        let top = fixture.top.path().canonicalize().expect("canonical top");
        match self {
            Self::Outside => "../outside".into(),
            Self::OutsideFile => "../outside/secret.txt".into(),
            Self::Parent => "..".into(),
            Self::ParentThenRoot => "../root".into(),
            Self::AbsoluteOutside => top.join("outside"),
            Self::AbsoluteOutsideFile => top.join("secret.txt"),
            Self::AbsoluteInside => fixture.root.join("dir"),
            Self::AbsoluteRoot => fixture.root.clone(),
            Self::Dot => ".".into(),
            Self::ReadOnlyRoot => "ro".into(),
            Self::AbsoluteReadOnlyFile => fixture.root.join("ro/keep.txt"),
            Self::Sibling => "a".into(),
            Self::Dangling => "missing".into(),
            Self::SelfLink => name.into(),
            Self::EscapeThroughDir => "dir/../..".into(),
        }
    }
}

#[derive(Arbitrary, Clone, Debug)]
enum Token {
    Dot,
    DotDot,
    Empty,
    Nul,
    Name(u8),
    Outside,
    Raw(String),
}

#[derive(Arbitrary, Clone, Copy, Debug)]
enum Base {
    Root,
    Top,
    Outside,
    SystemRoot,
}

#[derive(Arbitrary, Clone, Debug)]
struct PathSpec {
    base: Base,
    tokens: Vec<Token>,
    trailing_slash: bool,
}

impl PathSpec {
    fn bytes(&self, fixture: &Fixture) -> Vec<u8> {
        let top = fixture.top.path().canonicalize().expect("canonical top");
        let base = match self.base {
            Base::Root => fixture.root.clone(),
            Base::Top => top,
            Base::Outside => top.join("outside"),
            Base::SystemRoot => PathBuf::from("/"),
        };
        let mut out = base.into_os_string().into_vec();
        for token in &self.tokens {
            out.push(b'/');
            match token {
                Token::Dot => out.push(b'.'),
                Token::DotDot => out.extend_from_slice(b".."),
                Token::Empty => {}
                Token::Nul => out.push(0),
                Token::Name(i) => {
                    out.extend_from_slice(NAMES[usize::from(*i) % NAMES.len()].as_bytes())
                }
                Token::Outside => out.extend_from_slice(b"outside"),
                Token::Raw(s) => out.extend_from_slice(s.as_bytes()),
            }
        }
        if self.trailing_slash {
            out.push(b'/');
        }
        out
    }
}

#[derive(Arbitrary, Clone, Debug)]
enum Op {
    Read(PathSpec),
    Write(PathSpec, u8, u8),
    CreateDirectory(PathSpec, bool),
    GetMetadata(PathSpec),
    ReadDirectory(PathSpec),
    Remove(PathSpec, bool, bool),
    Copy(PathSpec, PathSpec, bool),
    Rename(PathSpec, PathSpec, bool),
    /// Harness step, not a library call: plants `root/<name> -> target` when the name is free.
    Link(u8, LinkTarget),
}

fn reset_root(fixture: &Fixture) {
    for entry in std::fs::read_dir(&fixture.root).expect("root") {
        let entry = entry.expect("entry");
        let path = entry.path();
        if path == fixture.root.join("ro") {
            continue;
        }
        if entry.file_type().expect("type").is_dir() {
            std::fs::remove_dir_all(&path).expect("clean dir");
        } else {
            std::fs::remove_file(&path).expect("clean file");
        }
    }
    std::fs::write(fixture.root.join("a"), b"inside a").expect("seed");
    std::fs::create_dir_all(fixture.root.join("dir/inner")).expect("seed");
    std::fs::write(fixture.root.join("dir/b"), b"inside b").expect("seed");
    std::os::unix::fs::symlink("../outside", fixture.root.join("up")).expect("seed link");
    let mode = rustix::fs::Mode::from_raw_mode(0o644);
    let fifo = rustix::fs::FileType::Fifo;
    rustix::fs::mknodat(rustix::fs::CWD, fixture.root.join("fifo"), fifo, mode, 0).expect("fifo");
    std::os::unix::fs::symlink(
        LinkTarget::AbsoluteOutsideFile.text(fixture, ""),
        fixture.root.join("abs_out"),
    )
    .expect("seed link");
    std::os::unix::fs::symlink(
        LinkTarget::AbsoluteInside.text(fixture, ""),
        fixture.root.join("abs_in"),
    )
    .expect("seed link");
}

/// A parsed path, or `None` when it must not be run: it holds a NUL byte (then parsing must
/// fail) or it is a mutation outside the temporary directory (a safety net for the host).
enum Target {
    Inside(AbsolutePathBuf),
    Outside(AbsolutePathBuf),
}

fn target(fixture: &Fixture, spec: &PathSpec) -> Option<Target> {
    let bytes = spec.bytes(fixture);
    match AbsolutePathBuf::new(OsStr::from_bytes(&bytes)) {
        Err(e) => {
            assert!(bytes.contains(&0), "{bytes:?} refused: {e}");
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            None
        }
        Ok(path) if path.as_path().starts_with(&fixture.root) => Some(Target::Inside(path)),
        Ok(path) => Some(Target::Outside(path)),
    }
}

fn outside_denied<T: std::fmt::Debug>(path: &AbsolutePathBuf, result: std::io::Result<T>) {
    match result {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {}
        other => panic!("{path:?} is outside the root, yet {other:?}"),
    }
}

fn check_no_token(bytes: &[u8]) {
    assert!(
        !bytes.windows(TOKEN.len()).any(|w| w == TOKEN),
        "canary contents leaked: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

async fn run(fixture: &Fixture, op: &Op) {
    let fs = &fixture.fs;
    let within_top = |p: &AbsolutePathBuf| {
        p.as_path()
            .starts_with(fixture.top.path().canonicalize().expect("canonical top"))
    };
    match op {
        Op::Read(spec) => match target(fixture, spec) {
            Some(Target::Inside(p)) => {
                if let Ok(data) = fs.read_file(&p).await {
                    check_no_token(&data);
                }
            }
            Some(Target::Outside(p)) => outside_denied(&p, fs.read_file(&p).await),
            None => {}
        },
        Op::GetMetadata(spec) => match target(fixture, spec) {
            Some(Target::Inside(p)) => drop(fs.get_metadata(&p).await),
            Some(Target::Outside(p)) => outside_denied(&p, fs.get_metadata(&p).await),
            None => {}
        },
        Op::ReadDirectory(spec) => match target(fixture, spec) {
            Some(Target::Inside(p)) => {
                if let Ok(entries) = fs.read_directory(&p).await {
                    for entry in entries {
                        assert!(
                            !["secret.txt", "sub", "deep.txt", "root"]
                                .contains(&entry.file_name.as_str()),
                            "{p:?} lists the canary's {:?}",
                            entry.file_name
                        );
                    }
                }
            }
            Some(Target::Outside(p)) => outside_denied(&p, fs.read_directory(&p).await),
            None => {}
        },
        Op::Write(spec, len, fill) => {
            let data = vec![b'a' + fill % 26; usize::from(*len)];
            match target(fixture, spec) {
                Some(Target::Inside(p)) => drop(fs.write_file(&p, data).await),
                Some(Target::Outside(p)) if within_top(&p) => {
                    outside_denied(&p, fs.write_file(&p, data).await)
                }
                _ => {}
            }
        }
        Op::CreateDirectory(spec, recursive) => {
            let options = CreateDirectoryOptions::default().with_recursive(*recursive);
            match target(fixture, spec) {
                Some(Target::Inside(p)) => drop(fs.create_directory(&p, options).await),
                Some(Target::Outside(p)) if within_top(&p) => {
                    outside_denied(&p, fs.create_directory(&p, options).await)
                }
                _ => {}
            }
        }
        Op::Remove(spec, recursive, force) => {
            let options = RemoveOptions::default()
                .with_recursive(*recursive)
                .with_force(*force);
            match target(fixture, spec) {
                Some(Target::Inside(p)) => drop(fs.remove(&p, options).await),
                Some(Target::Outside(p)) if within_top(&p) => {
                    outside_denied(&p, fs.remove(&p, options).await)
                }
                _ => {}
            }
        }
        Op::Copy(from, to, recursive) => {
            let options = CopyOptions::default().with_recursive(*recursive);
            if let (Some(from), Some(to)) = (target(fixture, from), target(fixture, to)) {
                two_paths(fixture, from, to, |a, b| async move {
                    fs.copy(&a, &b, options).await
                })
                .await;
            }
        }
        Op::Rename(from, to, overwrite) => {
            let options = RenameOptions::default().with_overwrite(*overwrite);
            if let (Some(from), Some(to)) = (target(fixture, from), target(fixture, to)) {
                two_paths(fixture, from, to, |a, b| async move {
                    fs.rename(&a, &b, options).await
                })
                .await;
            }
        }
        Op::Link(name, link) => {
            let name = NAMES[usize::from(*name) % NAMES.len()];
            let path = fixture.root.join(name);
            if std::fs::symlink_metadata(&path).is_err() {
                std::os::unix::fs::symlink(link.text(fixture, name), &path).expect("plant link");
            }
        }
    }
}

async fn two_paths<F, Fut>(fixture: &Fixture, from: Target, to: Target, op: F)
where
    F: FnOnce(AbsolutePathBuf, AbsolutePathBuf) -> Fut,
    Fut: Future<Output = std::io::Result<()>>,
{
    let top = fixture.top.path().canonicalize().expect("canonical top");
    match (from, to) {
        (Target::Inside(a), Target::Inside(b)) => drop(op(a, b).await),
        (Target::Inside(a) | Target::Outside(a), Target::Inside(b) | Target::Outside(b)) => {
            // Never let a broken sandbox move or copy onto the host beyond the temporary dir.
            if a.as_path().starts_with(&top) && b.as_path().starts_with(&top) {
                let result = op(a.clone(), b.clone()).await;
                assert!(
                    result.is_err(),
                    "{a:?} -> {b:?} crosses the root, yet succeeded"
                );
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    if ops.len() > 16 {
        return;
    }
    let fixture = fixture();
    reset_root(fixture);
    fixture.runtime.block_on(async {
        for (i, op) in ops.iter().enumerate() {
            run(fixture, op).await;
            let now = canary(fixture.top.path(), &fixture.root);
            assert!(now == fixture.canary, "op {i} {op:?} changed the canary");
            let root = std::fs::symlink_metadata(&fixture.root).expect("root still exists");
            assert!(root.is_dir(), "op {i} {op:?} replaced the root");
        }
    });
});
