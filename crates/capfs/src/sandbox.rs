//! `Sandbox`: the list of roots, their access mode and the cap-std handles opened on them.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, MetadataExt};

use crate::error;
use crate::path::AbsolutePathBuf;

/// Whether a root may be changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Every operation is allowed.
    ReadWrite,
    /// Only reads are allowed; every mutation is `PermissionDenied`.
    ReadOnly,
}

/// Identity of a file: device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub(crate) fn of(metadata: &cap_std::fs::Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
        }
    }
}

/// One sandbox root: its canonical path, the handle opened on it once, and its access mode.
#[derive(Debug)]
pub struct Root {
    path: AbsolutePathBuf,
    dir: Dir,
    access: Access,
    id: FileId,
    local_disk: bool,
    clones: bool,
    /// Other names this directory was asked for under (a configured path through a symlink, a
    /// narrowing request naming it through a link inside its root).
    spellings: Vec<AbsolutePathBuf>,
}

impl Root {
    /// A root on the directory `dir` opened at `path`, its identity and file system read from
    /// the handle.
    pub(crate) fn from_dir(path: AbsolutePathBuf, dir: Dir, access: Access) -> io::Result<Self> {
        let id = FileId::of(&dir.dir_metadata()?);
        let magic = file_system_magic(&dir);
        let local = magic.and_then(|m| LOCAL_DISKS.iter().find(|(known, _)| *known == m));
        Ok(Self {
            path,
            dir,
            access,
            id,
            local_disk: local.is_some(),
            // Anything not known to lack reflinks is asked for one.
            clones: local.is_none_or(|(_, clones)| *clones),
            spellings: Vec::new(),
        })
    }

    /// Another handle on the same root, with its access.
    pub(crate) fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            path: self.path.clone(),
            dir: self.dir.try_clone()?,
            access: self.access,
            id: self.id,
            local_disk: self.local_disk,
            clones: self.clones,
            spellings: self.spellings.clone(),
        })
    }

    /// The other absolute paths this root was asked for under, which name the same directory
    /// (through symlinks): the path given to [`Sandbox::with_root`] when it was not canonical,
    /// the paths a [`Sandbox::narrowed`] request named it by. Callers may map them onto
    /// [`path`](Self::path); the sandbox itself serves only `path`.
    pub fn spellings(&self) -> &[AbsolutePathBuf] {
        &self.spellings
    }

    /// Records `spelling` as another name of this root, unless it is its path or known.
    pub(crate) fn add_spelling(&mut self, spelling: AbsolutePathBuf) {
        if spelling != self.path && !self.spellings.contains(&spelling) {
            self.spellings.push(spelling);
        }
    }

    /// Makes the root read-only.
    pub(crate) fn make_read_only(&mut self) {
        self.access = Access::ReadOnly;
    }

    /// The canonical absolute path under which callers address this root.
    pub fn path(&self) -> &AbsolutePathBuf {
        &self.path
    }

    /// The root's access mode.
    pub fn access(&self) -> Access {
        self.access
    }

    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    pub(crate) fn id(&self) -> FileId {
        self.id
    }

    /// True when the root's directory is on a local-disk file system (ext2/3/4, XFS, Btrfs,
    /// tmpfs, overlayfs, F2FS, ZFS and the like), decided once with `fstatfs` when the root was
    /// opened. Cheap operations on such a root run on the calling task; on any other file system
    /// (NFS, SMB, FUSE, `/proc`...) a `stat` can stall, so every operation goes to the blocking
    /// pool.
    pub fn is_local_disk(&self) -> bool {
        self.local_disk
    }

    /// False when the root's file system is known to have no reflinks (ext2/3/4, tmpfs and the
    /// like), so that a copy does not ask for one (`FICLONE`) only to be refused, file by file.
    pub(crate) fn may_clone(&self) -> bool {
        self.clones
    }
}

/// The local-disk file systems, whose metadata operations never wait on a network or a
/// user-space server, by `f_type`, each with whether it may have reflinks (`FICLONE`).
const LOCAL_DISKS: [(u64, bool); 14] = [
    (EXT4_MAGIC, false), // ext2, ext3, ext4
    (XFS_MAGIC, true),
    (0x9123_683E, true),  // Btrfs
    (0x0102_1994, false), // tmpfs
    (0x8584_58F6, false), // ramfs
    (0x794C_7630, true),  // overlayfs
    (0xF2F5_2010, true),  // F2FS
    (0x2FC1_2FC1, true),  // ZFS
    (0xCA45_1A4E, true),  // bcachefs
    (0x3153_464A, false), // JFS
    (0x5265_4973, false), // ReiserFS
    (0x4D44, false),      // FAT
    (0x2011_BAB0, false), // exFAT
    (0x7366_746E, true),  // NTFS (ntfs3)
];

/// The `f_type` of ext2, ext3 and ext4, which share it.
pub(crate) const EXT4_MAGIC: u64 = 0xEF53;

/// The `f_type` of XFS.
pub(crate) const XFS_MAGIC: u64 = 0x5846_5342;

/// The `f_type` of the file system holding `fd` (a directory, a file).
pub(crate) fn file_system_magic(fd: &impl AsFd) -> Option<u64> {
    rustix::fs::fstatfs(fd)
        .ok()
        .map(|stat| stat.f_type as u64 & 0xFFFF_FFFF)
}

/// The set of directories a file system may reach.
///
/// Each root is opened once, when it is added; later renames of its path on the host do not
/// change which directory it designates. A path is served by the root that is its longest prefix
/// (at a component boundary); a path under no root is `PermissionDenied`.
///
/// # Examples
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let sandbox = capfs::Sandbox::new().with_root(dir.path(), capfs::Access::ReadWrite)?;
/// assert_eq!(sandbox.roots().len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Sandbox {
    roots: Vec<Root>,
    /// The roots of the sandbox this one was narrowed from ([`Sandbox::narrowed`]): never
    /// served, but recognised by identity as roots and read-only roots are, so narrowing never
    /// makes a read-only directory writable or a root removable.
    guarded: Vec<Root>,
}

/// A path resolved to its root and the part below it.
pub(crate) struct Resolved<'a> {
    pub root: &'a Root,
    /// Relative to the root; empty for the root itself. Borrowed from the path resolved.
    pub rel: &'a Path,
}

impl Resolved<'_> {
    pub(crate) fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }

    /// The relative path in the form cap-std expects (`.` for the root).
    pub(crate) fn cap_path(&self) -> &Path {
        if self.is_root() {
            Path::new(".")
        } else {
            self.rel
        }
    }

    /// Fails with `PermissionDenied` when the root is read-only.
    pub(crate) fn require_writable(&self, path: &AbsolutePathBuf) -> io::Result<()> {
        match self.root.access {
            Access::ReadWrite => Ok(()),
            Access::ReadOnly => Err(error::read_only(path)),
        }
    }
}

impl Sandbox {
    /// An empty sandbox; add roots with [`Sandbox::with_root`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens `path` (made absolute and canonical against the process's directory, once, here) and
    /// adds it as a root.
    ///
    /// # Errors
    ///
    /// `NotFound` or `NotADirectory` when the directory cannot be opened; `AlreadyExists` when
    /// the same directory is already a root.
    pub fn with_root(mut self, path: impl AsRef<Path>, access: Access) -> io::Result<Self> {
        let path = path.as_ref();
        let canonical = std::fs::canonicalize(path).map_err(|e| error::at_host_path(path, &e))?;
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority())
            .map_err(|e| error::at_host_path(&canonical, &e))?;
        let mut root = Root::from_dir(AbsolutePathBuf::new(&canonical)?, dir, access)?;
        if self
            .roots
            .iter()
            .any(|r| r.path == root.path || r.id == root.id)
        {
            return Err(error::already_a_root(&root.path));
        }
        // The name as given, made absolute against the process's directory (lexically).
        if let Ok(given) = std::path::absolute(path).and_then(AbsolutePathBuf::new) {
            root.add_spelling(given);
        }
        self.roots.push(root);
        Ok(self)
    }

    /// Treats every root as if it were on a network file system: every operation of a
    /// [`LocalFileSystem`](crate::LocalFileSystem) over this sandbox runs on the blocking pool.
    /// For tests of that mode on a machine whose disks are all local (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn treat_roots_as_remote_disks(mut self) -> Self {
        for root in &mut self.roots {
            root.local_disk = false;
        }
        self
    }

    /// The roots, in the order they were added.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// A sandbox of `roots` that also guards, by identity, every root of `from` (and those
    /// `from` guards).
    pub(crate) fn narrowing(from: &Sandbox, roots: Vec<Root>) -> io::Result<Self> {
        let guarded = from
            .roots
            .iter()
            .chain(&from.guarded)
            .map(Root::try_clone)
            .collect::<io::Result<_>>()?;
        Ok(Self { roots, guarded })
    }

    /// The roots served and those guarded after a narrowing.
    pub(crate) fn roots_and_guarded(&self) -> impl Iterator<Item = &Root> {
        self.roots.iter().chain(&self.guarded)
    }

    /// The root that serves `path` and the part of `path` below it: the root whose path is the
    /// longest prefix of `path` at a component boundary (`/ws` serves `/ws/a` but not `/wsx`).
    ///
    /// `Some` guarantees that `root.path()` joined with the returned relative path is `path`,
    /// and that the relative path has no `.`, `..` or root component (it is empty for the root
    /// itself). It is a lexical answer: symlinks below the root are resolved later, inside the
    /// root's handle. `None` when no root contains `path`; every operation on such a path fails
    /// with `PermissionDenied`.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> std::io::Result<()> {
    /// use capfs::{AbsolutePathBuf, Access, Sandbox};
    ///
    /// let dir = tempfile::tempdir()?;
    /// std::fs::create_dir(dir.path().join("inner"))?;
    /// let sandbox = Sandbox::new()
    ///     .with_root(dir.path(), Access::ReadWrite)?
    ///     .with_root(dir.path().join("inner"), Access::ReadOnly)?;
    /// let inner = sandbox.roots()[1].path();
    ///
    /// let path = inner.join("a/b")?;
    /// let (root, rel) = sandbox.root_for(&path).unwrap();
    /// assert_eq!((root.path(), rel), (inner, std::path::Path::new("a/b")));
    /// assert!(sandbox.root_for(&AbsolutePathBuf::try_from("/")?).is_none());
    /// # Ok(()) }
    /// ```
    pub fn root_for<'p>(&self, path: &'p AbsolutePathBuf) -> Option<(&Root, &'p Path)> {
        // Both paths are normal (one `/` between components, none at the end, no `.` or `..`),
        // so a root contains `path` exactly when its bytes are a prefix ending at a `/` or at
        // the end; of the roots that do, the longest has the most components. Called on every
        // request, so it compares bytes instead of iterating components.
        let bytes = path.as_path().as_os_str().as_bytes();
        self.roots
            .iter()
            .filter_map(|root| {
                let prefix = root.path.as_path().as_os_str().as_bytes();
                let rest = bytes.strip_prefix(prefix)?;
                let rel = match rest {
                    [] => rest,
                    // The root `/` ends in the separator itself.
                    _ if prefix == b"/" => rest,
                    [b'/', rel @ ..] => rel,
                    _ => return None,
                };
                Some((root, prefix.len(), Path::new(OsStr::from_bytes(rel))))
            })
            .max_by_key(|(_, len, _)| *len)
            .map(|(root, _, rel)| (root, rel))
    }

    /// Finds the root that serves `path` (see [`Sandbox::root_for`]).
    ///
    /// # Errors
    ///
    /// `PermissionDenied` when no root contains `path`.
    pub(crate) fn resolve<'a>(&'a self, path: &'a AbsolutePathBuf) -> io::Result<Resolved<'a>> {
        self.root_for(path)
            .map(|(root, rel)| Resolved { root, rel })
            .ok_or_else(|| error::outside_roots(path))
    }

    /// True when `id` is the identity of any root's directory.
    pub(crate) fn is_root_id(&self, id: FileId) -> bool {
        self.roots_and_guarded().any(|r| r.id == id)
    }

    /// True when `id` is the identity of a read-only root's directory, wherever that directory
    /// is now and whichever root reaches it.
    pub(crate) fn is_read_only_id(&self, id: FileId) -> bool {
        self.roots_and_guarded()
            .any(|r| r.access == Access::ReadOnly && r.id == id)
    }

    /// True when the sandbox has a read-only root at all.
    pub(crate) fn has_read_only_root(&self) -> bool {
        self.roots_and_guarded()
            .any(|r| r.access == Access::ReadOnly)
    }

    /// True when some root other than `except` (a served one, or a guarded one with another
    /// identity) lies at or below `path`.
    pub(crate) fn contains_other_root(&self, path: &AbsolutePathBuf, except: &Root) -> bool {
        self.roots_and_guarded().any(|r| {
            !std::ptr::eq(r, except) && r.id != except.id && r.path.strip_prefix(path).is_some()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Access;

    /// The byte comparison in `root_for` against the component-wise definition it replaces.
    #[test]
    fn root_for_matches_whole_components_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for name in ["in", "inner", "inner/deep"] {
            std::fs::create_dir_all(base.join(name)).unwrap();
        }
        let nested = || {
            let mut sandbox = Sandbox::new();
            for root in [base.join("in"), base.join("inner"), base.join("inner/deep")] {
                sandbox = sandbox.with_root(root, Access::ReadOnly).unwrap();
            }
            sandbox
        };
        let sandbox = nested();
        let with_slash = nested().with_root("/", Access::ReadOnly).unwrap();
        let names = [
            "",
            "in",
            "in/x",
            "inn",
            "inner",
            "inner/",
            "inner/x/y",
            "inner/deep",
            "inner/deeper",
            "inner/deep/z",
            "other",
        ];
        for sandbox in [&sandbox, &with_slash] {
            for name in names {
                let path = AbsolutePathBuf::new(base.join(name)).unwrap();
                let expected = sandbox
                    .roots()
                    .iter()
                    .filter_map(|root| {
                        path.as_path()
                            .strip_prefix(root.path())
                            .ok()
                            .map(|rel| (root, rel))
                    })
                    .max_by_key(|(root, _)| root.path().as_path().components().count())
                    .map(|(root, rel)| (root.path().clone(), rel.to_path_buf()));
                let found = sandbox
                    .root_for(&path)
                    .map(|(root, rel)| (root.path().clone(), rel.to_path_buf()));
                assert_eq!(found, expected, "{name:?}");
            }
        }
        let top = AbsolutePathBuf::new("/").unwrap();
        assert_eq!(with_slash.root_for(&top).unwrap().1, Path::new(""));
        assert!(sandbox.root_for(&top).is_none());
    }
}
