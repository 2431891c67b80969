//! The one identity everything an agent causes acts as: the file side's calls and the
//! processes it starts. A server started as root finds the identity (named by its operator, or
//! the owner of its roots), checks that it can reach every root, then [becomes](Identity::assume)
//! it for good: from then on every file the server touches is checked by the kernel against that
//! user's own permissions, so a confinement bug in the file side meets the user's limits, never
//! root's. Nothing keeps root afterwards; what needs it (the listening socket, the roots'
//! handles) is prepared before.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use cap_std::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{Access as FileAccess, AtFlags, Mode, OFlags};

use crate::error;
use crate::sandbox::{Access, Sandbox};

/// A user and the one group it acts with (no supplementary groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Identity {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

impl Identity {
    /// `uid` with `gid`.
    pub fn new(uid: u32, gid: u32) -> Self {
        Self { uid, gid }
    }

    /// The identity this process acts as now (its effective ids).
    pub fn current() -> Self {
        Self {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// Whether this is the superuser.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// The owner of `sandbox`'s roots: of its read-write roots when it has any (what the agent
    /// writes), else of all of them, with the group of the first such root.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when those roots belong to different users, naming two of them.
    pub fn owner_of(sandbox: &Sandbox) -> io::Result<Self> {
        let roots = sandbox.roots();
        let writable = roots.iter().any(|r| r.access() == Access::ReadWrite);
        let mut owner: Option<(Self, &crate::AbsolutePathBuf)> = None;
        for root in roots {
            if writable && root.access() != Access::ReadWrite {
                continue;
            }
            let stat = root.dir().dir_metadata()?;
            let found = Self::new(stat.uid(), stat.gid());
            match owner {
                None => owner = Some((found, root.path())),
                Some((first, path)) if first.uid != found.uid => {
                    return Err(error::roots_of_different_owners(
                        path,
                        first.uid,
                        root.path(),
                        found.uid,
                    ));
                }
                Some(_) => {}
            }
        }
        owner
            .map(|(identity, _)| identity)
            .ok_or_else(|| error::fixed(io::ErrorKind::InvalidInput, "no roots"))
    }

    /// Becomes this identity for good, in every thread of the process: no supplementary
    /// groups, then the group, then the user (real, effective and saved), and the process no
    /// longer dumpable (its memory and `/proc` entries stay root's, out of reach of processes
    /// running as the same user). Nothing to do when the process already is it.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` when the process is neither root nor this identity.
    pub fn assume(&self) -> io::Result<()> {
        let current = Self::current();
        if current == *self && rustix::process::getuid().as_raw() == self.uid {
            return Ok(());
        }
        if !current.is_root() {
            return Err(error::cannot_become(current, *self));
        }
        // The C library's wrappers change the credentials of every thread, not only the
        // caller's (the raw system calls change one thread's).
        #[allow(unsafe_code)]
        // SAFETY: plain calls with integer arguments and an empty list.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(self.gid, self.gid, self.gid) != 0
                || libc::setresuid(self.uid, self.uid, self.uid) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        Ok(())
    }

    /// Checks, as this identity (the caller must have [assumed](Self::assume) it), that `path`
    /// can be reached and used with `access`: every ancestor searchable, the directory
    /// readable and searchable, and writable for `ReadWrite`.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` naming the first directory that blocks the way, with its mode and
    /// owner, and what this identity lacks there.
    pub fn check_reach(&self, path: &Path, access: Access) -> io::Result<()> {
        let mut walked = PathBuf::from("/");
        let mut components = path.components().skip(1).peekable();
        loop {
            let dot = walked.join(".");
            let c = CString::new(dot.as_os_str().as_bytes())?;
            let searchable = rustix::fs::open(
                c.as_c_str(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            );
            if let Err(e) = searchable {
                return Err(self.blocked(&walked, "search (x)", e.into()));
            }
            match components.next() {
                Some(component) => walked.push(component),
                None => break,
            }
        }
        let c = CString::new(path.as_os_str().as_bytes())?;
        let mut wanted = FileAccess::READ_OK | FileAccess::EXEC_OK;
        let mut what = "read and search (r-x)";
        if access == Access::ReadWrite {
            wanted |= FileAccess::WRITE_OK;
            what = "read, write and search (rwx)";
        }
        rustix::fs::accessat(rustix::fs::CWD, c.as_c_str(), wanted, AtFlags::EACCESS)
            .map_err(|e| self.blocked(path, what, e.into()))
    }

    fn blocked(&self, dir: &Path, what: &str, err: io::Error) -> io::Error {
        let found = std::fs::symlink_metadata(dir)
            .map(|m| (m.mode() & 0o7777, m.uid(), m.gid()))
            .ok();
        error::unreachable_root(dir, what, *self, found, &err)
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uid {} gid {}", self.uid, self.gid)
    }
}
