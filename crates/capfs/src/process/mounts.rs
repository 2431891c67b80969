//! Directories kept read-only inside a writable root. Landlock rules only add rights, so a
//! read-only directory under a writable one is held by the mount table instead: the child gets
//! a mount namespace of its own, private (nothing propagates to or from the host), and a
//! read-only bind mount of each such directory over itself. The parent opens each directory
//! through the sandbox and records its path as the kernel names it and its identity; the child
//! resolves that path with no link allowed and refuses to mount unless it finds the same
//! directory, so a link or a directory swapped in since cannot redirect a mount.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use rustix::mount::{MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

use crate::error;
use crate::sandbox::{Access, Root, Sandbox};

/// A directory as the parent found it: its path without links and its identity.
#[derive(Debug)]
pub(crate) struct Located {
    path: CString,
    dev: u64,
    ino: u64,
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
        })
    }

    /// Opens the path again, links refused, and checks it is still the same directory.
    fn reopen(&self) -> io::Result<OwnedFd> {
        let fd = rustix::fs::openat2(
            rustix::fs::CWD,
            self.path.as_c_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
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
pub(crate) struct ReadOnlyMounts {
    /// The directories to bind read-only over themselves.
    pub dirs: Vec<Located>,
    /// The working directory, entered again once the mounts are in place: entered before, it
    /// would stay on the writable directory beneath a mount.
    pub cwd: Located,
}

impl ReadOnlyMounts {
    /// In the child, in a mount namespace of its own, with the privilege to mount: makes every
    /// mount private, then binds each directory read-only over itself, then enters the working
    /// directory again. `set_read_only` makes a detached tree read-only (`mount_setattr`).
    /// Only system calls on memory prepared by the parent: nothing allocates.
    pub(crate) fn apply(
        &self,
        set_read_only: impl Fn(BorrowedFd<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )?;
        for dir in &self.dirs {
            let target = dir.reopen()?;
            let tree = rustix::mount::open_tree(
                &target,
                c"",
                OpenTreeFlags::OPEN_TREE_CLONE
                    | OpenTreeFlags::OPEN_TREE_CLOEXEC
                    | OpenTreeFlags::AT_EMPTY_PATH,
            )?;
            set_read_only(tree.as_fd())?;
            rustix::mount::move_mount(
                &tree,
                c"",
                &target,
                c"",
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
            )?;
        }
        let cwd = self.cwd.reopen()?;
        rustix::process::fchdir(&cwd)?;
        Ok(())
    }
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
