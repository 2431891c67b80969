//! Property tests (proptest): path normalisation, root matching, artifact names, and random
//! operation plans that must leave an outside canary untouched and give the same results on the
//! local and the remote backend.
//!
//! The plans run on twin trees, one served locally and one by a single `capfs serve` started for
//! the whole run: a read-write root with a read-only root nested in it, a second read-write root
//! beside it, and a canary beside both. Trees hold files, directories, FIFOs, hard links to an
//! outside file, and symlinks that point inside, out, into the other roots, at themselves and
//! nowhere.
//!
//! Case counts are kept small so the whole file runs in a few seconds in a debug build;
//! `CAPFS_PROPTEST_CASES=N` runs every property N times. The cargo-fuzz targets under `fuzz/`
//! explore the same oracles for longer.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use capfs::artifact::{image_generation_artifact_path, sanitize};
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoteFileSystem, RemoteOptions, RemoveOptions, RenameOptions, Sandbox,
};

// ---------------------------------------------------------------------------------------------
// Generators

/// One path component, hostile ones included.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("A".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just(String::new()),
        Just("link".to_string()),
        Just("\\".to_string()),
        Just("CON".to_string()),
        Just("\0".to_string()),
        Just("é".to_string()),
        Just("n".repeat(255)),
        Just("n".repeat(256)),
        "[a-z.]{1,4}",
    ]
}

/// A path string: components joined by `/`, maybe absolute, maybe with a trailing slash.
fn path_string() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(component(), 0..8),
        any::<bool>(),
    )
        .prop_map(|(absolute, parts, trailing)| {
            let mut s = if absolute {
                "/".to_string()
            } else {
                String::new()
            };
            s.push_str(&parts.join("/"));
            if trailing {
                s.push('/');
            }
            s
        })
}

/// `/`-separated normalisation over the string, written without `std::path`.
fn reference_normalise(s: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in s.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

fn only_normal_components(path: &Path) -> bool {
    path.components()
        .all(|c| matches!(c, Component::Normal(n) if !n.is_empty()))
}

/// The case count: `default`, or `CAPFS_PROPTEST_CASES` when set (for long local runs).
fn cases(default: u32) -> u32 {
    std::env::var("CAPFS_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

// ---------------------------------------------------------------------------------------------
// AbsolutePathBuf

/// Nested roots, a sibling sharing a string prefix (`rx`, `r/subx`), and an unrelated one.
const ROOT_NAMES: [&str; 6] = ["r", "r/sub", "r/sub/deep", "rx", "r/subx", "other"];

struct Roots {
    _dir: tempfile::TempDir,
    /// Canonical paths of [`ROOT_NAMES`], in order.
    paths: Vec<PathBuf>,
}

fn roots_fixture() -> &'static Roots {
    static ROOTS: OnceLock<Roots> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths = ROOT_NAMES
            .iter()
            .map(|name| {
                let path = dir.path().join(name);
                std::fs::create_dir_all(&path).expect("root dir");
                path.canonicalize().expect("canonical")
            })
            .collect();
        Roots { _dir: dir, paths }
    })
}

/// A path string that starts at one of the roots (or at `/`) and goes on with hostile parts.
fn path_near_roots() -> impl Strategy<Value = String> {
    (0..ROOT_NAMES.len() + 2, path_string()).prop_map(|(base, rest)| {
        let roots = roots_fixture();
        let base = match base {
            i if i < roots.paths.len() => roots.paths[i].to_str().expect("utf-8").to_string(),
            i if i == roots.paths.len() => roots.paths[0]
                .parent()
                .and_then(Path::to_str)
                .expect("parent")
                .to_string(),
            _ => String::new(),
        };
        format!("{base}/{rest}")
    })
}

proptest! {
    #![proptest_config(Config { cases: cases(256), ..Config::default() })]

    #[test]
    fn normalisation_is_idempotent_absolute_and_clean(input in path_string()) {
        match AbsolutePathBuf::try_from(input.as_str()) {
            Err(e) => {
                prop_assert!(!input.starts_with('/') || input.contains('\0'), "{input:?}: {e}");
                prop_assert_eq!(e.kind(), ErrorKind::InvalidInput);
            }
            Ok(path) => {
                prop_assert!(input.starts_with('/') && !input.contains('\0'), "{:?}", input);
                let text = path.as_path().to_str().expect("utf-8 in, utf-8 out");
                prop_assert_eq!(text, reference_normalise(&input));
                prop_assert!(path.as_path().is_absolute());
                prop_assert!(!text.contains('\0'));
                let below_root: Vec<_> = path.as_path().components().skip(1).collect();
                prop_assert!(below_root.iter().all(|c| matches!(c, Component::Normal(_))));
                prop_assert_eq!(AbsolutePathBuf::new(path.as_path()).unwrap(), path.clone());
                prop_assert_eq!(AbsolutePathBuf::try_from(text).unwrap(), path);
            }
        }
    }

    #[test]
    fn root_matching_picks_the_longest_component_prefix(
        mask in 1u8..(1 << ROOT_NAMES.len()),
        input in path_near_roots(),
    ) {
        let roots = roots_fixture();
        let mut sandbox = Sandbox::new();
        for (i, path) in roots.paths.iter().enumerate() {
            if mask & (1 << i) != 0 {
                sandbox = sandbox.with_root(path, Access::ReadWrite).unwrap();
            }
        }
        let Ok(path) = AbsolutePathBuf::try_from(input.as_str()) else {
            prop_assert!(input.contains('\0'));
            return Ok(());
        };
        let wanted: Vec<Component<'_>> = path.as_path().components().collect();
        let expected = sandbox
            .roots()
            .iter()
            .filter(|r| wanted.starts_with(&r.path().as_path().components().collect::<Vec<_>>()))
            .max_by_key(|r| r.path().as_path().components().count());
        match (sandbox.root_for(&path), expected) {
            (None, None) => {}
            (Some((root, rel)), Some(expected)) => {
                prop_assert_eq!(root.path(), expected.path());
                prop_assert!(only_normal_components(rel), "{:?} -> {:?}", path, rel);
                prop_assert!(!rel.starts_with(".."));
                let rejoined = AbsolutePathBuf::new(root.path().as_path().join(rel)).unwrap();
                prop_assert_eq!(rejoined, path);
            }
            (got, expected) => {
                prop_assert!(false, "{:?}: got {:?}, expected {:?}", path, got, expected)
            }
        }
    }

    #[test]
    fn a_path_under_no_root_is_permission_denied(input in path_near_roots()) {
        let roots = roots_fixture();
        // Only `r/sub` is a root here, so its parent, siblings and `/` are outside.
        let fs = LocalFileSystem::new(
            Sandbox::new().with_root(&roots.paths[1], Access::ReadWrite).unwrap(),
        );
        let Ok(path) = AbsolutePathBuf::try_from(input.as_str()) else {
            return Ok(());
        };
        if path.as_path().starts_with(&roots.paths[1]) {
            // Inside the root: another property's business (most generated paths are not).
            return Ok(());
        }
        prop_assert!(fs.sandbox().root_for(&path).is_none());
        let rt = runtime();
        let kinds = [
            rt.block_on(fs.get_metadata(&path)).map(drop),
            rt.block_on(fs.read_file(&path)).map(drop),
            rt.block_on(fs.read_directory(&path)).map(drop),
        ];
        for result in kinds {
            prop_assert_eq!(result.map_err(|e| e.kind()), Err(ErrorKind::PermissionDenied));
        }
        // Mutations only where a broken sandbox could do no harm: inside the temporary dir.
        if path.as_path().starts_with(roots.paths[0].parent().unwrap()) {
            let results = [
                rt.block_on(fs.write_file(&path, b"x".to_vec())),
                rt.block_on(fs.create_directory(&path, CreateDirectoryOptions { recursive: true })),
                rt.block_on(fs.remove(&path, RemoveOptions::default())),
            ];
            for result in results {
                prop_assert_eq!(result.map_err(|e| e.kind()), Err(ErrorKind::PermissionDenied));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Artifacts

fn hostile_id() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just(String::new()),
        Just("..".to_string()),
        Just(".".to_string()),
        Just("/".to_string()),
        Just("a/../../b".to_string()),
        Just("\0".to_string()),
        "[./\\\\\0a-zé_-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(Config { cases: cases(512), ..Config::default() })]

    #[test]
    fn sanitize_is_safe_idempotent_and_length_preserving(id in hostile_id()) {
        let out = sanitize(&id);
        prop_assert!(!out.is_empty());
        prop_assert!(out.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{:?}", out);
        prop_assert_eq!(sanitize(&out), out.clone());
        if id.is_empty() {
            prop_assert_eq!(out, "generated_image");
        } else {
            prop_assert_eq!(out.chars().count(), id.chars().count());
        }
    }

    #[test]
    fn artifact_path_is_two_components_below_generated_images(
        home in prop_oneof![Just("/".to_string()), Just("/home/agent".to_string()), "/[a-z./]{0,10}"],
        session_id in hostile_id(),
        call_id in hostile_id(),
    ) {
        let home = AbsolutePathBuf::try_from(home).unwrap();
        let path = image_generation_artifact_path(&home, &session_id, &call_id);
        let images = home.join("generated_images").unwrap();
        let rel = path.strip_prefix(&images).expect("under home/generated_images");
        let parts: Vec<Component<'_>> = rel.components().collect();
        let file_name = format!("{}.png", sanitize(&call_id));
        let session = sanitize(&session_id);
        prop_assert_eq!(
            parts,
            vec![Component::Normal(session.as_ref()), Component::Normal(file_name.as_ref())]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Operation plans: confinement and local/remote equivalence

/// Relative paths a tree entry may occupy.
const SLOTS: [&str; 8] = ["a", "b", "d", "d/a", "d/e", "e", "d/e/a", "f"];

/// Names an operation's path is built from (besides `.`, `..` and empty components).
const OP_NAMES: [&str; 10] = [
    "a", "b", "d", "e", "f", "outside", "ro", "keep.txt", "é", LONG_NAME,
];

/// One byte over the usual 255-byte name limit.
const LONG_NAME: &str = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn";

/// Where a symlink planted in the tree points.
#[derive(Clone, Copy, Debug)]
enum LinkTo {
    RelativeInside,
    RelativeEscape,
    AbsoluteOutside,
    AbsoluteInside,
    Dot,
    DotDot,
    ItSelf,
    Dangling,
    EscapeThroughDir,
    ReadOnlyRoot,
    AbsoluteReadOnlyFile,
    AbsoluteSibling,
    RelativeSibling,
}

#[derive(Clone, Debug)]
enum Entry {
    Dir(usize),
    File(usize, Vec<u8>),
    Symlink(usize, LinkTo),
    Fifo(usize),
    /// A hard link to `outside/linked.txt`: an ordinary file, whose outside name must keep its
    /// contents whatever is done to the inside one.
    Hardlink(usize),
}

#[derive(Clone, Copy, Debug)]
enum Base {
    Root,
    Sibling,
    Outside,
    Top,
}

#[derive(Clone, Debug)]
struct OpPath {
    base: Base,
    parts: Vec<String>,
}

#[derive(Clone, Debug)]
enum Op {
    Read(OpPath),
    Write(OpPath, Vec<u8>),
    CreateDirectory(OpPath, bool),
    GetMetadata(OpPath),
    ReadDirectory(OpPath),
    Remove(OpPath, bool, bool),
    Copy(OpPath, OpPath, bool),
    Rename(OpPath, OpPath, bool),
}

fn entry() -> impl Strategy<Value = Entry> {
    let slot = 0..SLOTS.len();
    let link = prop_oneof![
        Just(LinkTo::RelativeInside),
        Just(LinkTo::RelativeEscape),
        Just(LinkTo::AbsoluteOutside),
        Just(LinkTo::AbsoluteInside),
        Just(LinkTo::Dot),
        Just(LinkTo::DotDot),
        Just(LinkTo::ItSelf),
        Just(LinkTo::Dangling),
        Just(LinkTo::EscapeThroughDir),
        Just(LinkTo::ReadOnlyRoot),
        Just(LinkTo::AbsoluteReadOnlyFile),
        Just(LinkTo::AbsoluteSibling),
        Just(LinkTo::RelativeSibling),
    ];
    prop_oneof![
        slot.clone().prop_map(Entry::Dir),
        (slot.clone(), prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(s, data)| Entry::File(s, data)),
        (slot.clone(), link).prop_map(|(s, l)| Entry::Symlink(s, l)),
        slot.clone().prop_map(Entry::Fifo),
        slot.prop_map(Entry::Hardlink),
    ]
}

fn op_path() -> impl Strategy<Value = OpPath> {
    let base = prop_oneof![
        14 => Just(Base::Root),
        1 => Just(Base::Outside),
        1 => Just(Base::Top),
        2 => Just(Base::Sibling),
    ];
    let part = prop_oneof![
        12 => (0..OP_NAMES.len()).prop_map(|i| OP_NAMES[i].to_string()),
        1 => Just(".".to_string()),
        1 => Just("..".to_string()),
        1 => Just(String::new()),
    ];
    (base, prop::collection::vec(part, 0..4)).prop_map(|(base, parts)| OpPath { base, parts })
}

fn op() -> impl Strategy<Value = Op> {
    let data = prop::collection::vec(any::<u8>(), 0..16);
    prop_oneof![
        op_path().prop_map(Op::Read),
        (op_path(), data).prop_map(|(p, d)| Op::Write(p, d)),
        (op_path(), any::<bool>()).prop_map(|(p, r)| Op::CreateDirectory(p, r)),
        op_path().prop_map(Op::GetMetadata),
        op_path().prop_map(Op::ReadDirectory),
        (op_path(), any::<bool>(), any::<bool>()).prop_map(|(p, r, f)| Op::Remove(p, r, f)),
        (op_path(), op_path(), any::<bool>()).prop_map(|(a, b, r)| Op::Copy(a, b, r)),
        (op_path(), op_path(), any::<bool>()).prop_map(|(a, b, o)| Op::Rename(a, b, o)),
    ]
}

const CANARY_TOKEN: &[u8] = b"CANARY-TOKEN-4e1b";

/// One tree: `top/root` is the sandbox root; `top/outside` and `top/secret.txt` are the canary.
struct Tree {
    top: PathBuf,
    root: PathBuf,
}

impl Tree {
    fn create(top: &Path) -> Self {
        let top = top.canonicalize().expect("canonical top");
        let root = top.join("root");
        std::fs::create_dir(&root).expect("root");
        std::fs::create_dir_all(top.join("outside/sub")).expect("canary");
        std::fs::write(top.join("outside/secret.txt"), CANARY_TOKEN).expect("canary");
        std::fs::write(top.join("outside/sub/deep.txt"), CANARY_TOKEN).expect("canary");
        std::fs::write(top.join("secret.txt"), CANARY_TOKEN).expect("canary");
        std::os::unix::fs::symlink("../root", top.join("outside/to_root")).expect("canary");
        std::fs::write(top.join("outside/linked.txt"), b"hard-linked").expect("canary");
        // A read-only root nested in the read-write one: its contents must never change either.
        std::fs::create_dir(root.join("ro")).expect("read-only root");
        // A second read-write root beside the first, for operations across roots.
        std::fs::create_dir(top.join("sibling")).expect("sibling root");
        Self { top, root }
    }

    /// Empties `dir` (never following a link), leaving `dir` itself and the entry `keep`.
    fn empty(dir: &Path, keep: Option<&Path>) {
        for entry in std::fs::read_dir(dir).expect("dir") {
            let entry = entry.expect("entry");
            if Some(entry.path().as_path()) == keep {
                continue;
            }
            if entry.file_type().expect("type").is_dir() {
                std::fs::remove_dir_all(entry.path()).expect("clean");
            } else {
                std::fs::remove_file(entry.path()).expect("clean");
            }
        }
    }

    fn read_only_root(&self) -> PathBuf {
        self.root.join("ro")
    }

    fn sibling_root(&self) -> PathBuf {
        self.top.join("sibling")
    }

    fn link_text(&self, slot: &str, to: LinkTo) -> PathBuf {
        match to {
            LinkTo::RelativeInside => "a".into(),
            LinkTo::RelativeEscape => {
                let depth = slot.matches('/').count() + 1;
                PathBuf::from(format!("{}outside", "../".repeat(depth)))
            }
            LinkTo::AbsoluteOutside => self.top.join("outside"),
            LinkTo::AbsoluteInside => self.root.join("d"),
            LinkTo::AbsoluteSibling => self.sibling_root().join("a"),
            LinkTo::RelativeSibling => {
                let depth = slot.matches('/').count() + 1;
                PathBuf::from(format!("{}sibling", "../".repeat(depth)))
            }
            LinkTo::Dot => ".".into(),
            LinkTo::DotDot => "..".into(),
            LinkTo::ItSelf => Path::new(slot).file_name().expect("name").into(),
            LinkTo::Dangling => "missing".into(),
            LinkTo::EscapeThroughDir => "d/../../..".into(),
            LinkTo::ReadOnlyRoot => {
                let depth = slot.matches('/').count();
                PathBuf::from(format!("{}ro", "../".repeat(depth)))
            }
            LinkTo::AbsoluteReadOnlyFile => self.root.join("ro/keep.txt"),
        }
    }

    /// Empties the root and lays `entries` out in it (an entry whose slot or parent is taken by
    /// something else is skipped).
    fn reset(&self, entries: &[Entry]) {
        let ro = self.read_only_root();
        Self::empty(&self.root, Some(&ro));
        Self::empty(&ro, None);
        std::fs::create_dir(ro.join("sub")).expect("read-only root");
        std::fs::write(ro.join("keep.txt"), b"read-only").expect("read-only root");
        std::fs::write(ro.join("sub/deep.txt"), b"read-only").expect("read-only root");
        let sibling = self.sibling_root();
        Self::empty(&sibling, None);
        std::fs::create_dir(sibling.join("d")).expect("sibling root");
        std::fs::write(sibling.join("a"), b"sibling").expect("sibling root");
        for entry in entries {
            let slot = match entry {
                Entry::Dir(s)
                | Entry::File(s, _)
                | Entry::Symlink(s, _)
                | Entry::Fifo(s)
                | Entry::Hardlink(s) => SLOTS[*s],
            };
            let path = self.root.join(slot);
            // Create missing parents one by one; a parent that is a file or a symlink (which
            // could lead the harness itself out of the root) skips the entry.
            let mut parent = self.root.clone();
            let mut usable = true;
            for name in Path::new(slot).parent().expect("parent").components() {
                parent.push(name);
                match std::fs::symlink_metadata(&parent) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => usable = false,
                    Err(_) => std::fs::create_dir(&parent).expect("parent dir"),
                }
                if !usable {
                    break;
                }
            }
            if !usable || std::fs::symlink_metadata(&path).is_ok() {
                continue;
            }
            match entry {
                Entry::Dir(_) => std::fs::create_dir(&path).expect("dir"),
                Entry::File(_, data) => std::fs::write(&path, data).expect("file"),
                Entry::Symlink(_, to) => {
                    std::os::unix::fs::symlink(self.link_text(slot, *to), &path).expect("link")
                }
                Entry::Hardlink(_) => {
                    std::fs::hard_link(self.top.join("outside/linked.txt"), &path).expect("link")
                }
                Entry::Fifo(_) => {
                    let mode = rustix::fs::Mode::from_raw_mode(0o644);
                    let fifo = rustix::fs::FileType::Fifo;
                    rustix::fs::mknodat(rustix::fs::CWD, &path, fifo, mode, 0).expect("fifo")
                }
            }
        }
    }

    fn path(&self, spec: &OpPath) -> AbsolutePathBuf {
        let base = match spec.base {
            Base::Root => self.root.clone(),
            Base::Outside => self.top.join("outside"),
            Base::Top => self.top.clone(),
            Base::Sibling => self.sibling_root(),
        };
        let mut text = base.into_os_string().into_vec();
        for part in &spec.parts {
            text.push(b'/');
            text.extend_from_slice(part.as_bytes());
        }
        AbsolutePathBuf::new(OsStr::from_bytes(&text)).expect("generated paths parse")
    }

    /// Everything below `from` (not following links): relative path → (kind, contents or link
    /// text with this tree's top replaced by `$TOP`, and optionally mode and mtime).
    fn snapshot(&self, from: &Path, skip: &[&Path], times: bool) -> Snapshot {
        let mut out = Snapshot::new();
        let mut todo = vec![from.to_path_buf()];
        let top = self.top.as_os_str().as_bytes();
        while let Some(path) = todo.pop() {
            let meta = std::fs::symlink_metadata(&path).expect("snapshot entry");
            let rel = path.strip_prefix(from).expect("below").to_path_buf();
            let (kind, content) = if meta.file_type().is_symlink() {
                let text = std::fs::read_link(&path).expect("link").into_os_string();
                let text = text.as_bytes();
                let text = match text.strip_prefix(top) {
                    Some(rest) => [b"$TOP".as_slice(), rest].concat(),
                    None => text.to_vec(),
                };
                ('l', text)
            } else if meta.is_file() {
                ('f', std::fs::read(&path).expect("file"))
            } else if !meta.is_dir() {
                ('p', Vec::new())
            } else {
                for entry in std::fs::read_dir(&path).expect("dir") {
                    let entry = entry.expect("entry");
                    if !skip.contains(&entry.path().as_path()) {
                        todo.push(entry.path());
                    }
                }
                ('d', Vec::new())
            };
            let stamp = if times && path != from {
                (meta.mode(), meta.mtime(), meta.mtime_nsec())
            } else {
                (0, 0, 0)
            };
            out.insert(rel, (kind, content, stamp));
        }
        out
    }

    /// What no operation may change: the whole top directory except the read-write roots'
    /// subtrees, and the read-only root nested in the root.
    fn canary(&self) -> (Snapshot, Snapshot) {
        let ro = self.read_only_root();
        (
            self.snapshot(&self.top, &[&self.root, &self.sibling_root()], true),
            self.snapshot(&ro, &[], true),
        )
    }

    /// What the roots hold, to compare the twin trees by.
    fn contents(&self) -> (Snapshot, Snapshot) {
        (
            self.snapshot(&self.root, &[], false),
            self.snapshot(&self.sibling_root(), &[], false),
        )
    }
}

type Snapshot = BTreeMap<PathBuf, (char, Vec<u8>, (u32, i64, i64))>;

/// What an operation returned, in a form both backends can be compared by.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Data(Vec<u8>),
    Metadata {
        is_directory: bool,
        is_file: bool,
        is_symlink: bool,
        size: Option<u64>,
    },
    Entries(Vec<(String, bool, bool, bool)>),
    Failed(ErrorKind),
}

async fn apply(fs: &dyn ExecutorFileSystem, tree: &Tree, op: &Op) -> Outcome {
    let done =
        |r: std::io::Result<()>| r.map_or_else(|e| Outcome::Failed(e.kind()), |()| Outcome::Done);
    match op {
        Op::Read(p) => match fs.read_file(&tree.path(p)).await {
            Ok(data) => Outcome::Data(data),
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::Write(p, data) => done(fs.write_file(&tree.path(p), data.clone()).await),
        Op::CreateDirectory(p, recursive) => done(
            fs.create_directory(
                &tree.path(p),
                CreateDirectoryOptions {
                    recursive: *recursive,
                },
            )
            .await,
        ),
        Op::GetMetadata(p) => match fs.get_metadata(&tree.path(p)).await {
            Ok(m) => Outcome::Metadata {
                is_directory: m.is_directory,
                is_file: m.is_file,
                is_symlink: m.is_symlink,
                // A directory's size depends on the file system's history, not on its contents.
                size: (!m.is_directory).then_some(m.size),
            },
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::ReadDirectory(p) => match fs.read_directory(&tree.path(p)).await {
            Ok(entries) => {
                let mut entries: Vec<_> = entries
                    .into_iter()
                    .map(|e| (e.file_name, e.is_directory, e.is_file, e.is_symlink))
                    .collect();
                entries.sort();
                Outcome::Entries(entries)
            }
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::Remove(p, recursive, force) => done(
            fs.remove(
                &tree.path(p),
                RemoveOptions {
                    recursive: *recursive,
                    force: *force,
                },
            )
            .await,
        ),
        Op::Copy(a, b, recursive) => done(
            fs.copy(
                &tree.path(a),
                &tree.path(b),
                CopyOptions {
                    recursive: *recursive,
                },
            )
            .await,
        ),
        Op::Rename(a, b, overwrite) => done(
            fs.rename(
                &tree.path(a),
                &tree.path(b),
                RenameOptions {
                    overwrite: *overwrite,
                },
            )
            .await,
        ),
    }
}

/// True when `path` is lexically outside the tree's root.
fn outside(tree: &Tree, spec: &OpPath) -> bool {
    let path = tree.path(spec);
    !path.as_path().starts_with(&tree.root) && !path.as_path().starts_with(tree.sibling_root())
}

/// The checks every outcome must pass whatever the backend: nothing read carries the canary's
/// token, and an operation on a path outside the root fails.
fn check_outcome(tree: &Tree, op: &Op, outcome: &Outcome) -> Result<(), TestCaseError> {
    if let Outcome::Data(data) = outcome {
        prop_assert!(
            !data.windows(CANARY_TOKEN.len()).any(|w| w == CANARY_TOKEN),
            "{:?} read the canary",
            op
        );
    }
    let single = match op {
        Op::Read(p)
        | Op::Write(p, _)
        | Op::CreateDirectory(p, _)
        | Op::GetMetadata(p)
        | Op::ReadDirectory(p)
        | Op::Remove(p, _, _) => Some(p),
        Op::Copy(..) | Op::Rename(..) => None,
    };
    match (single, op) {
        (Some(p), _) if outside(tree, p) => {
            prop_assert_eq!(
                outcome,
                &Outcome::Failed(ErrorKind::PermissionDenied),
                "{:?}",
                op
            )
        }
        (None, Op::Copy(a, b, _) | Op::Rename(a, b, _)) if outside(tree, a) || outside(tree, b) => {
            prop_assert!(
                matches!(outcome, Outcome::Failed(_)),
                "{:?} gave {:?}",
                op,
                outcome
            )
        }
        _ => {}
    }
    Ok(())
}

/// Round trips after a successful operation: what was written reads back, a created directory
/// is a directory.
async fn check_round_trip(
    fs: &dyn ExecutorFileSystem,
    tree: &Tree,
    op: &Op,
    outcome: &Outcome,
) -> Result<(), TestCaseError> {
    match (op, outcome) {
        (Op::Write(p, data), Outcome::Done) => {
            let read = fs.read_file(&tree.path(p)).await.map_err(|e| e.kind());
            prop_assert_eq!(read, Ok(data.clone()), "{:?} does not read back", op);
        }
        (Op::CreateDirectory(p, _), Outcome::Done) => {
            let meta = fs.get_metadata(&tree.path(p)).await.map_err(|e| e.kind());
            prop_assert!(
                meta.is_ok_and(|m| m.is_directory),
                "{:?} made no directory",
                op
            );
        }
        _ => {}
    }
    Ok(())
}

#[test]
fn operation_plans_stay_confined_and_backends_agree() {
    let rt = runtime();
    let local_top = tempfile::tempdir().expect("temp dir");
    let remote_top = tempfile::tempdir().expect("temp dir");
    let local_tree = Tree::create(local_top.path());
    let remote_tree = Tree::create(remote_top.path());
    let local = LocalFileSystem::new(
        Sandbox::new()
            .with_root(&local_tree.root, Access::ReadWrite)
            .and_then(|s| s.with_root(local_tree.read_only_root(), Access::ReadOnly))
            .and_then(|s| s.with_root(local_tree.sibling_root(), Access::ReadWrite))
            .expect("sandbox"),
    );
    // One server for the whole run, over the twin tree.
    let ro = remote_tree.read_only_root();
    let sibling = remote_tree.sibling_root();
    let args = [
        OsStr::new("--root"),
        remote_tree.root.as_os_str(),
        OsStr::new("--root"),
        sibling.as_os_str(),
        OsStr::new("--read-only"),
        ro.as_os_str(),
    ];
    let server = rt.block_on(crate::serve::ServerProcess::start_with(&args, &[]));
    let remote = rt
        .block_on(RemoteFileSystem::connect(
            &server.url,
            RemoteOptions::default(),
        ))
        .expect("connect");

    let config = Config {
        cases: cases(24),
        failure_persistence: None,
        ..Config::default()
    };
    let plan = (
        prop::collection::vec(entry(), 0..10),
        prop::collection::vec(op(), 1..=12),
    );
    let mut runner = TestRunner::new(config);
    let result = runner.run(&plan, |(entries, ops)| {
        local_tree.reset(&entries);
        remote_tree.reset(&entries);
        let local_canary = local_tree.canary();
        let remote_canary = remote_tree.canary();
        for (i, op) in ops.iter().enumerate() {
            let here = rt.block_on(apply(&local, &local_tree, op));
            let there = rt.block_on(apply(&remote, &remote_tree, op));
            check_outcome(&local_tree, op, &here)?;
            prop_assert_eq!(&here, &there, "op {} {:?}: local and remote differ", i, op);
            for (fs, tree) in [
                (&local as &dyn ExecutorFileSystem, &local_tree),
                (&remote, &remote_tree),
            ] {
                rt.block_on(check_round_trip(fs, tree, op, &here))?;
            }
            prop_assert_eq!(
                local_tree.canary(),
                local_canary.clone(),
                "op {} {:?} changed the canary",
                i,
                op
            );
            prop_assert_eq!(
                remote_tree.canary(),
                remote_canary.clone(),
                "op {} {:?} changed the canary (remote)",
                i,
                op
            );
            prop_assert_eq!(
                local_tree.contents(),
                remote_tree.contents(),
                "op {} {:?}: trees differ",
                i,
                op
            );
        }
        Ok(())
    });
    drop(server);
    if let Err(e) = result {
        panic!("{e}");
    }
}
