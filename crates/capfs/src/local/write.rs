//! `write_file`: resolve the final name (following symlinks that stay inside the root), then
//! replace it atomically with a temporary file written in the same directory.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use std::os::unix::fs::PermissionsExt as _;

use cap_std::fs::{Dir, File, Metadata, Permissions, PermissionsExt};
use cap_tempfile::TempFile;

use super::handles;
use super::resolve::{MAX_SYMLINK_HOPS, symlink_loop};
use super::stage::{StagedFile, link_as_new};
use super::{Inner, resolve};
use crate::error::{self, with_path};
use crate::file_system::WriteOptions;
use crate::path::AbsolutePathBuf;
use crate::sandbox::{Resolved, Root};

/// The permission bits a written or copied file may get: read, write and execute only.
const PLAIN_MODE_BITS: u32 = 0o777;

pub(crate) fn write_file(fs: &Inner, path: &AbsolutePathBuf, contents: &[u8]) -> io::Result<()> {
    write_with(fs, path, WriteOptions::default(), |file| {
        super::stage::preallocate_whole(file, contents.len() as u64);
        file.write_all(contents)
    })
}

/// Resolves the write target of `path` as `write_file` does and creates the file a streamed
/// write fills, to replace the target once complete.
pub(crate) fn stage(fs: &Inner, path: &AbsolutePathBuf) -> io::Result<StagedFile> {
    let resolved = fs.sandbox.resolve(path)?;
    resolved.require_writable(path)?;
    let target = WriteTarget::resolve(&resolved, path)?;
    handles::require_writable_dir(&fs.sandbox, resolved.root, &target.parent, path)?;
    let keep_mode = target
        .existing_file_permissions(path)?
        .map(|p| cap_std::fs::PermissionsExt::mode(&p));
    let free = target.existing.is_none();
    let owner = target.existing_owner();
    StagedFile::new(target.parent, &target.name, keep_mode, owner, free)
        .map_err(|e| with_path(path, e))
}

/// Sets a file's modification time to `ms` milliseconds after the Unix epoch (its access time
/// is left alone).
fn set_modified_ms(file: &File, ms: i64) -> io::Result<()> {
    let modified = rustix::fs::Timespec {
        tv_sec: ms.div_euclid(1000),
        tv_nsec: ms.rem_euclid(1000) * 1_000_000,
    };
    let omit = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_OMIT,
    };
    let times = rustix::fs::Timestamps {
        last_access: omit,
        last_modification: modified,
    };
    rustix::fs::futimens(file, &times).map_err(io::Error::from)
}

/// Resolves the write target of `path` and replaces it with what `fill` writes.
fn write_with(
    fs: &Inner,
    path: &AbsolutePathBuf,
    options: WriteOptions,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let resolved = fs.sandbox.resolve(path)?;
    resolved.require_writable(path)?;
    let target = WriteTarget::resolve(&resolved, path)?;
    handles::require_writable_dir(&fs.sandbox, resolved.root, &target.parent, path)?;
    let mut permissions = target.existing_file_permissions(path)?;
    if let Some(mode) = options.mode {
        // replace_file drops setuid, setgid and sticky, whatever the client asks.
        permissions = Some(Permissions::from_std(std::fs::Permissions::from_mode(
            mode & PLAIN_MODE_BITS,
        )));
    }
    let free = target.existing.is_none();
    let owner = target.existing_owner();
    replace_file(
        &target.parent,
        &target.name,
        permissions,
        owner,
        free,
        |file| {
            fill(file)?;
            if let Some(ms) = options.modified_at_ms {
                set_modified_ms(file, ms)?;
            }
            Ok(())
        },
    )
    .map_err(|e| with_path(path, e))
}

/// Where a write lands: a directory handle and a name in it, after following symlinks.
pub(crate) struct WriteTarget {
    pub parent: Dir,
    pub name: OsString,
    /// What is at the name now (never a symlink), if anything.
    pub existing: Option<Metadata>,
}

impl WriteTarget {
    /// Follows a symlink at the final name to its target while that stays inside the root: a
    /// relative text is joined to the link's directory, an absolute one is followed when it
    /// names a place under the root's path. A text that climbs above the root, or an absolute
    /// one under no part of it, is an escape.
    pub(crate) fn resolve(resolved: &Resolved<'_>, path: &AbsolutePathBuf) -> io::Result<Self> {
        if resolved.is_root() {
            return Err(error::is_a_directory(path));
        }
        let root: &Root = resolved.root;
        let mut rel = resolved.rel.to_path_buf();
        for _ in 0..=MAX_SYMLINK_HOPS {
            let (parent_rel, name) = handles::split(&rel);
            let parent = handles::open_parent(root, parent_rel).map_err(|e| with_path(path, e))?;
            let existing = match parent.symlink_metadata(name) {
                Ok(metadata) => Some(metadata),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(with_path(path, e)),
            };
            match existing {
                Some(metadata) if metadata.is_symlink() => {
                    let text = parent
                        .read_link_contents(name)
                        .map_err(|e| with_path(path, e))?;
                    let link_dir = if text.is_absolute() {
                        PathBuf::new()
                    } else {
                        resolve::resolve_links(root, parent_rel, true)
                            .map_err(|e| with_path(path, e))?
                    };
                    let text =
                        absolute_text_under_root(root, &text).ok_or_else(|| error::escape(path))?;
                    rel = match handles::join_link_target(&link_dir, &text) {
                        Some(next) if !next.as_os_str().is_empty() => next,
                        Some(_) => return Err(error::is_a_directory(path)),
                        None => return Err(error::escape(path)),
                    };
                }
                existing => {
                    return Ok(Self {
                        name: name.to_os_string(),
                        parent,
                        existing,
                    });
                }
            }
        }
        Err(with_path(path, symlink_loop()))
    }

    /// Permissions to keep when replacing: those of an existing regular file. A directory or a
    /// special file at the name is refused.
    pub(crate) fn existing_file_permissions(
        &self,
        path: &AbsolutePathBuf,
    ) -> io::Result<Option<Permissions>> {
        match &self.existing {
            None => Ok(None),
            Some(m) if m.is_dir() => Err(error::is_a_directory(path)),
            Some(m) if m.is_file() => Ok(Some(m.permissions())),
            Some(_) => Err(error::not_regular_file(path)),
        }
    }

    /// The owner and group of what is at the name now, which a replacement keeps.
    pub(crate) fn existing_owner(&self) -> Option<(u32, u32)> {
        use cap_std::fs::MetadataExt as _;
        self.existing.as_ref().map(|m| (m.uid(), m.gid()))
    }
}

/// A relative link text as it is; an absolute one relative to the root when it names a place
/// inside the root, `None` otherwise.
fn absolute_text_under_root(root: &Root, text: &Path) -> Option<PathBuf> {
    if !text.is_absolute() {
        return Some(text.to_path_buf());
    }
    let absolute = AbsolutePathBuf::new(text).ok()?;
    absolute.strip_prefix(root.path()).map(Path::to_path_buf)
}

/// Writes a new file with `fill` and renames it over `name` in `parent`: readers see the old
/// or the new content, never a mix, and a failure leaves `name` as it was. The temporary file
/// has no name while it is filled (O_TMPFILE). When `name` was found free (`name_is_free`)
/// and still is, the file is linked under it directly; otherwise, as Linux cannot rename an
/// unnamed file over another, it is linked under a random name just before the rename, and a
/// crash in that instant leaves a whole copy under that name (never a partial file at `name`).
///
/// The file gets `owner` (the owner and group of the file it replaces) before its permissions,
/// or the replace fails with `PermissionDenied` and `name` is left as it was.
///
/// `permissions` are applied without their setuid, setgid and sticky bits, as the kernel drops
/// setuid and setgid when another user writes a file: a copy or rewrite of a privileged program
/// never hands out a new privileged program.
pub(crate) fn replace_file(
    parent: &Dir,
    name: &OsStr,
    permissions: Option<Permissions>,
    owner: Option<(u32, u32)>,
    name_is_free: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let mut temp = TempFile::new(parent)?;
    fill(temp.as_file_mut())?;
    super::stage::keep_owner(temp.as_file(), owner)?;
    if let Some(permissions) = permissions {
        let plain = Permissions::from_std(std::fs::Permissions::from_mode(
            permissions.mode() & PLAIN_MODE_BITS,
        ));
        temp.as_file().set_permissions(plain)?;
    }
    // A new name needs no rename: the file is linked under it whole (dropping `temp` then
    // removes nothing but its own temporary name, if it had one). Tried only where the name
    // was found free, so that a replace does not pay for a link that must fail.
    if name_is_free && link_as_new(temp.as_file(), parent, name) {
        return Ok(());
    }
    temp.replace(name)
}
