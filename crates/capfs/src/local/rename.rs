//! `rename`: between two parent handles of the same root, by way of a claim on the source (see
//! `claim.rs`), so that a sandbox root swapped under either name is never moved or replaced.
//!
//! Without `overwrite` the claimed source is renamed with `RENAME_NOREPLACE`. With it, the
//! source is exchanged with the destination (`RENAME_EXCHANGE`), the displaced entry is checked
//! on its new name, swapped back if it is a root (or does not fit the rename's rules), and only
//! then removed.

use std::ffi::OsStr;
use std::io::{self, ErrorKind};

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, RenameFlags};

use super::claim::{self, Claim};
use super::{Inner, handles};
use crate::error::{self, with_path};
use crate::file_system::RenameOptions;
use crate::path::AbsolutePathBuf;
use crate::sandbox::Sandbox;

/// How often an overwriting rename retries when the destination appears or vanishes between
/// its steps.
const OVERWRITE_ATTEMPTS: usize = 8;

pub(crate) fn rename(
    fs: &Inner,
    source: &AbsolutePathBuf,
    destination: &AbsolutePathBuf,
    options: RenameOptions,
) -> io::Result<()> {
    let src = fs.sandbox.resolve(source)?;
    let dst = fs.sandbox.resolve(destination)?;
    src.require_writable(source)?;
    dst.require_writable(destination)?;
    for (resolved, path) in [(&src, source), (&dst, destination)] {
        if resolved.is_root() || fs.sandbox.contains_other_root(path, resolved.root) {
            return Err(error::root_protected(path));
        }
    }
    if !std::ptr::eq(src.root, dst.root) {
        return Err(error::rename_across_roots(source));
    }
    let root = src.root;
    let (src_parent_rel, src_name) = handles::split(src.rel);
    let (dst_parent_rel, dst_name) = handles::split(dst.rel);
    let src_parent =
        handles::open_parent(root, src_parent_rel).map_err(|e| with_path(source, e))?;
    let dst_parent =
        handles::open_parent(root, dst_parent_rel).map_err(|e| with_path(destination, e))?;
    for (parent, path) in [(&src_parent, source), (&dst_parent, destination)] {
        handles::require_writable_dir(&fs.sandbox, root, parent, path)?;
    }
    // The usual refusal of an existing destination, before the source is touched.
    if !options.overwrite && claim::identify(&dst_parent, dst_name).is_ok() {
        return Err(with_path(
            destination,
            io::Error::from_raw_os_error(rustix::io::Errno::EXIST.raw_os_error()),
        ));
    }
    let claim = claim::claim(&fs.sandbox, &src_parent, src_name, source)?;
    let target = Target {
        sandbox: &fs.sandbox,
        parent: &dst_parent,
        name: dst_name,
        path: destination,
    };
    if options.overwrite {
        rename_over(&claim, &target, source)?;
    } else {
        rename_new(&claim, &target, source)?;
    }
    claim.release();
    Ok(())
}

/// The destination of a rename.
struct Target<'a> {
    sandbox: &'a Sandbox,
    parent: &'a Dir,
    name: &'a OsStr,
    path: &'a AbsolutePathBuf,
}

/// Renames the claimed entry to a destination name that must not exist.
fn rename_new(claim: &Claim<'_>, target: &Target<'_>, source: &AbsolutePathBuf) -> io::Result<()> {
    claim.verify(source)?;
    move_claimed(claim, target, RenameFlags::NOREPLACE, source)
}

/// Renames the claimed entry over the destination, which may exist.
fn rename_over(claim: &Claim<'_>, target: &Target<'_>, source: &AbsolutePathBuf) -> io::Result<()> {
    for _ in 0..OVERWRITE_ATTEMPTS {
        claim.verify(source)?;
        match move_claimed(claim, target, RenameFlags::EXCHANGE, source) {
            Ok(()) => return remove_displaced(claim, target),
            // Nothing at the destination to exchange with: a plain rename that still refuses
            // to replace whatever may appear there meanwhile.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                match move_claimed(claim, target, RenameFlags::NOREPLACE, source) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(error::replaced_during(target.path))
}

/// One `renameat2` from the claim's private name to the destination.
fn move_claimed(
    claim: &Claim<'_>,
    target: &Target<'_>,
    flags: RenameFlags,
    source: &AbsolutePathBuf,
) -> io::Result<()> {
    rustix::fs::renameat_with(
        claim.parent(),
        claim.name(),
        target.parent,
        target.name,
        flags,
    )
    .map_err(|e| {
        let err = io::Error::from(e);
        // An existing destination is the destination's fault; everything else names the source.
        if err.kind() == ErrorKind::AlreadyExists {
            with_path(target.path, err)
        } else if err.kind() == ErrorKind::NotFound && flags.contains(RenameFlags::EXCHANGE) {
            err
        } else {
            with_path(source, err)
        }
    })
}

/// Undoes an exchange: the displaced entry returns to the destination, the claimed one to the
/// private name.
fn swap_back(claim: &Claim<'_>, target: &Target<'_>) {
    let result = rustix::fs::renameat_with(
        claim.parent(),
        claim.name(),
        target.parent,
        target.name,
        RenameFlags::EXCHANGE,
    );
    if let Err(e) = result {
        tracing::warn!("{}: could not undo an exchange: {e}", target.path);
    }
}

/// After an exchange the destination's old entry sits at the private name. It is removed as a
/// rename over it would have removed it; a root, or an entry the rename may not replace (a
/// directory over a file or the reverse, a non-empty directory), is swapped back instead.
fn remove_displaced(claim: &Claim<'_>, target: &Target<'_>) -> io::Result<()> {
    let err = |e| with_path(target.path, e);
    let refuse = |e: io::Error| {
        swap_back(claim, target);
        Err(e)
    };
    let (_, file_type) = claim::identify(claim.parent(), claim.name()).map_err(err)?;
    let displaced_is_dir = file_type == FileType::Directory;
    if displaced_is_dir && claim::is_protected(target.sandbox, claim.parent(), claim.name())? {
        return refuse(error::root_protected(target.path));
    }
    if displaced_is_dir != claim.is_dir() {
        // The errors rename(2) gives for the same mismatch.
        let errno = if displaced_is_dir {
            rustix::io::Errno::ISDIR
        } else {
            rustix::io::Errno::NOTDIR
        };
        return refuse(err(io::Error::from_raw_os_error(errno.raw_os_error())));
    }
    let flags = if displaced_is_dir {
        AtFlags::REMOVEDIR
    } else {
        AtFlags::empty()
    };
    match rustix::fs::unlinkat(claim.parent(), claim.name(), flags) {
        Ok(()) => Ok(()),
        Err(e) => refuse(err(e.into())),
    }
}
