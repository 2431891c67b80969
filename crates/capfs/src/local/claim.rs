//! Claiming an entry before it is moved or removed by name.
//!
//! Linux renames and removes entries by name only, so checking what a name holds and then
//! acting on that name are two system calls, and whoever can rename entries in the same
//! directory can put a sandbox root under the name in between. A claim narrows that window: the
//! entry is first renamed to a private random name in the same directory (`RENAME_NOREPLACE`),
//! then identified there (device and inode, without following or opening it), and put back at
//! once if it is a root or holds one. The final rename or removal then acts on the private
//! name, which no other process chose and which is checked again just before.

use std::ffi::{OsStr, OsString};
use std::io;

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, RenameFlags};

use super::handles;
use crate::error;
use crate::path::AbsolutePathBuf;
use crate::sandbox::{FileId, Sandbox};

/// An entry of `parent` moved to a private name and checked not to be, or hold, a sandbox root.
/// Dropped without [`Claim::release`], it is put back under its original name.
pub(crate) struct Claim<'a> {
    parent: &'a Dir,
    original: OsString,
    private: OsString,
    id: FileId,
    is_dir: bool,
    released: bool,
}

/// The identity and type of the entry `name` in `dir`, from one `statat` that neither follows
/// a symlink nor opens anything.
pub(crate) fn identify(dir: &Dir, name: &OsStr) -> io::Result<(FileId, FileType)> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let id = FileId {
        dev: stat.st_dev,
        ino: stat.st_ino,
    };
    Ok((id, FileType::from_raw_mode(stat.st_mode)))
}

/// True when the entry `name` of `dir` is a directory that is a sandbox root or holds one.
pub(crate) fn is_protected(sandbox: &Sandbox, dir: &Dir, name: &OsStr) -> io::Result<bool> {
    match identify(dir, name) {
        Ok((id, FileType::Directory)) => handles::is_or_holds_a_root(sandbox, id),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Moves `name` in `parent` to a private name and checks what it is. `PermissionDenied` (with
/// the entry put back) when it is a sandbox root or holds one.
pub(crate) fn claim<'a>(
    sandbox: &Sandbox,
    parent: &'a Dir,
    name: &OsStr,
    path: &AbsolutePathBuf,
) -> io::Result<Claim<'a>> {
    // The usual refusal, without touching the directory; the check after the move is the one
    // that holds under a race.
    if is_protected(sandbox, parent, name).map_err(|e| error::with_path(path, e))? {
        return Err(error::root_protected(path));
    }
    let private = handles::temporary_name("claim");
    rustix::fs::renameat_with(parent, name, parent, &private, RenameFlags::NOREPLACE)
        .map_err(|e| error::with_path(path, e.into()))?;
    let mut claim = Claim {
        parent,
        original: name.to_os_string(),
        private,
        id: FileId { dev: 0, ino: 0 },
        is_dir: false,
        released: false,
    };
    let (id, file_type) =
        identify(parent, &claim.private).map_err(|e| error::with_path(path, e))?;
    claim.id = id;
    claim.is_dir = file_type == FileType::Directory;
    if claim.is_dir
        && handles::is_or_holds_a_root(sandbox, id).map_err(|e| error::with_path(path, e))?
    {
        return Err(error::root_protected(path));
    }
    Ok(claim)
}

impl Claim<'_> {
    /// The private name the entry has now.
    pub(crate) fn name(&self) -> &OsStr {
        &self.private
    }

    /// The directory that holds the private name.
    pub(crate) fn parent(&self) -> &Dir {
        self.parent
    }

    /// The entry's identity, taken when it was claimed.
    pub(crate) fn id(&self) -> FileId {
        self.id
    }

    /// True when the claimed entry is a directory.
    pub(crate) fn is_dir(&self) -> bool {
        self.is_dir
    }

    /// Fails when the private name no longer holds the claimed entry (someone who listed the
    /// directory exchanged it); the caller must then not act on the name.
    pub(crate) fn verify(&self, path: &AbsolutePathBuf) -> io::Result<()> {
        match identify(self.parent, &self.private) {
            Ok((id, _)) if id == self.id => Ok(()),
            Ok(_) => Err(error::replaced_during(path)),
            Err(e) => Err(error::with_path(path, e)),
        }
    }

    /// The entry is gone or has been moved on purpose: nothing to put back.
    pub(crate) fn release(mut self) {
        self.released = true;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let result = rustix::fs::renameat_with(
            self.parent,
            &self.private,
            self.parent,
            &self.original,
            RenameFlags::NOREPLACE,
        );
        if let Err(e) = result
            && e != rustix::io::Errno::NOENT
        {
            tracing::warn!(
                "could not put {:?} back as {:?}: {e}",
                self.private,
                self.original
            );
        }
    }
}
