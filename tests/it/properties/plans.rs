//! Random operation plans: the tree they run on, the operations and the generators that draw
//! them.

use super::*;

mod run;

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
