//! The mount table a confined process sees. Landlock rules only add rights and do not mediate
//! changes of mode, owner or times, so two things are held by the mount table instead: the
//! whole host is read-only for the process (a file outside the roots that its user owns cannot
//! be `chmod`ed or `touch`ed), and a read-only directory under a writable root is a read-only
//! bind of itself. The child gets a mount namespace of its own, private (nothing propagates to
//! or from the host), with its writable directories bound writable over a read-only tree, and a
//! `/proc` of its own PID namespace. The parent opens each directory through the sandbox and
//! records its path as the kernel names it and its identity; the child resolves that path with
//! no link allowed and refuses to mount unless it finds the same directory, so a link or a
//! directory swapped in since cannot redirect a mount.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

use crate::error;
use crate::sandbox::{Access, Root, Sandbox};

/// A directory as the parent found it: its path without links and its identity.
#[derive(Debug)]
pub(crate) struct Located {
    path: CString,
    dev: u64,
    ino: u64,
    directory: bool,
}

impl Located {
    /// The directory `dir` refers to, as the kernel names it now.
    pub(crate) fn of(dir: BorrowedFd<'_>) -> io::Result<Self> {
        let stat = rustix::fs::fstat(dir)?;
        let path = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&dir)
        ))?;
        let bytes = path.into_os_string().into_vec();
        // A removed directory is named with a " (deleted)" suffix; only a plain absolute path
        // can be found again in the child.
        if !bytes.starts_with(b"/") || bytes.ends_with(b" (deleted)") {
            return Err(error::read_only_dir_unreachable());
        }
        Ok(Self {
            path: CString::new(bytes)?,
            dev: stat.st_dev,
            ino: stat.st_ino,
            directory: true,
        })
    }

    /// The file `file` refers to, as the kernel names it now.
    pub(crate) fn of_file(file: BorrowedFd<'_>) -> io::Result<Self> {
        let mut located = Self::of(file)?;
        located.directory = false;
        Ok(located)
    }

    /// Opens the path again, links refused, and checks it is still the same directory (or file).
    fn reopen(&self) -> io::Result<OwnedFd> {
        let mut flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if self.directory {
            flags |= OFlags::DIRECTORY;
        }
        let fd = rustix::fs::openat2(
            rustix::fs::CWD,
            self.path.as_c_str(),
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )?;
        let stat = rustix::fs::fstat(&fd)?;
        if stat.st_dev != self.dev || stat.st_ino != self.ino {
            return Err(Errno::PERM.into());
        }
        Ok(fd)
    }
}

/// What the child mounts, prepared by the parent.
#[derive(Debug)]
pub(crate) struct Mounts {
    /// The directories the process may write (its read-write roots, its temporary directory
    /// and its home): writable binds of themselves over a read-only host.
    pub writable: Vec<Located>,
    /// The directories to bind read-only over themselves, inside writable ones.
    pub read_only: Vec<Located>,
    /// The working directory, entered again once the mounts are in place: entered before, it
    /// would stay on what the mounts cover.
    pub cwd: Located,
    /// One slot per writable directory for its detached copy, made by the parent so that the
    /// child allocates nothing.
    pub copies: Vec<Option<OwnedFd>>,
    /// A file to bind read-only over `/etc/resolv.conf` (transparent TCP: it names the
    /// process's own DNS responder), when `/etc/resolv.conf` exists.
    pub resolv_conf: Option<Located>,
}

impl Mounts {
    /// What a process sees, prepared for the child: `writable` and `read_only` directories, and
    /// the working directory `cwd`.
    pub(crate) fn new(writable: Vec<Located>, read_only: Vec<Located>, cwd: Located) -> Self {
        let copies = writable.iter().map(|_| None).collect();
        Self {
            writable,
            read_only,
            cwd,
            copies,
            resolv_conf: None,
        }
    }

    /// In the child, in mount and PID namespaces of its own, with the privilege to mount:
    /// makes every mount private; copies each writable directory as it is; mounts a `/proc` of
    /// the new PID namespace (it shows the process's own processes only); makes the whole
    /// tree read-only, so that nothing outside the writable directories can be changed, not
    /// its contents, not its modes, owners or times; puts the writable copies back over their
    /// directories and the read-only binds over theirs; binds the process's own `resolv.conf`
    /// (transparent TCP); enters the working directory again.
    /// `set_attr` applies a `mount_attr` to a tree (`mount_setattr`). Only system calls on
    /// memory prepared by the parent: nothing allocates.
    pub(crate) fn apply(
        &mut self,
        set_read_only: impl Fn(BorrowedFd<'_>, bool) -> io::Result<()>,
    ) -> io::Result<()> {
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )?;
        for (dir, copy) in self.writable.iter().zip(self.copies.iter_mut()) {
            let target = dir.reopen()?;
            *copy = Some(copy_tree(&target, true)?);
        }
        rustix::mount::mount(
            c"proc",
            c"/proc",
            c"proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            None,
        )?;
        let root = rustix::fs::open(
            c"/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        set_read_only(root.as_fd(), true)?;
        for (dir, copy) in self.writable.iter().zip(self.copies.iter_mut()) {
            let target = dir.reopen()?;
            if let Some(tree) = copy.take() {
                put(&tree, &target)?;
            }
        }
        for dir in &self.read_only {
            let target = dir.reopen()?;
            let tree = copy_tree(&target, false)?;
            set_read_only(tree.as_fd(), false)?;
            put(&tree, &target)?;
        }
        if let Some(file) = &self.resolv_conf {
            bind_resolv_conf(file, &set_read_only)?;
        }
        let cwd = self.cwd.reopen()?;
        rustix::process::fchdir(&cwd)?;
        Ok(())
    }
}

/// Binds `file` read-only over `/etc/resolv.conf` (through a link, where it is one); without
/// an `/etc/resolv.conf` the C library asks 127.0.0.1 already.
fn bind_resolv_conf(
    file: &Located,
    set_read_only: &impl Fn(BorrowedFd<'_>, bool) -> io::Result<()>,
) -> io::Result<()> {
    let target = match rustix::fs::open(
        c"/etc/resolv.conf",
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(target) => target,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let source = file.reopen()?;
    let tree = copy_tree(&source, false)?;
    set_read_only(tree.as_fd(), false)?;
    put(&tree, &target)
}

/// A detached copy of the mount tree at `target` (with what is mounted below it when
/// `recursive`).
fn copy_tree(target: &OwnedFd, recursive: bool) -> io::Result<OwnedFd> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    Ok(rustix::mount::open_tree(target, c"", flags)?)
}

/// Mounts the detached `tree` over `target`.
fn put(tree: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    rustix::mount::move_mount(
        tree,
        c"",
        target,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )?;
    Ok(())
}

/// The roots of `sandbox` that are read-only directories inside one of its writable roots,
/// which processes get as read-only mounts; any other nesting is refused (`InvalidInput`): a
/// writable directory inside another root could be moved away by a process, and one inside a
/// read-only root gains nothing from being a root of its own.
pub(crate) fn read_only_inside_writable(sandbox: &Sandbox) -> io::Result<Vec<&Root>> {
    let roots = sandbox.roots();
    let mut mounts = Vec::new();
    for (i, a) in roots.iter().enumerate() {
        for b in roots.iter().skip(i + 1) {
            let (outer, inner) = match (
                a.path().strip_prefix(b.path()),
                b.path().strip_prefix(a.path()),
            ) {
                (Some(_), _) => (b, a),
                (_, Some(_)) => (a, b),
                _ => continue,
            };
            if outer.access() != Access::ReadWrite || inner.access() != Access::ReadOnly {
                return Err(error::nested_roots_not_read_only(
                    outer.path(),
                    inner.path(),
                ));
            }
            if !mounts.iter().any(|m: &&Root| m.id() == inner.id()) {
                mounts.push(inner);
            }
        }
    }
    Ok(mounts)
}
