//! `rename`: one atomic `renameat` (or `renameat2(RENAME_NOREPLACE)`) between two parent handles
//! of the same root.

use std::io::{self, ErrorKind};

use rustix::fs::RenameFlags;

use super::errors::{self, with_path};
use super::walk;
use super::{Inner, resolve};
use crate::{AbsolutePathBuf, RenameOptions};

pub(crate) fn rename(
    fs: &Inner,
    source: &AbsolutePathBuf,
    destination: &AbsolutePathBuf,
    options: RenameOptions,
) -> io::Result<()> {
    let src = fs.sandbox.resolve(source)?;
    let dst = fs.sandbox.resolve(destination)?;
    resolve::require_writable(&fs.sandbox, &src, source, false)?;
    resolve::require_writable(&fs.sandbox, &dst, destination, false)?;
    for (resolved, path) in [(&src, source), (&dst, destination)] {
        if resolved.is_root() || fs.sandbox.contains_other_root(path, resolved.root) {
            return Err(errors::root_protected(path));
        }
    }
    if !std::ptr::eq(src.root, dst.root) {
        return Err(io::Error::new(
            ErrorKind::CrossesDevices,
            format!("{source}: cannot rename across sandbox roots"),
        ));
    }
    let root = src.root;
    let (src_parent_rel, src_name) = walk::split(&src.rel);
    let (dst_parent_rel, dst_name) = walk::split(&dst.rel);
    let src_parent = walk::open_parent(root, src_parent_rel).map_err(|e| with_path(source, e))?;
    let dst_parent =
        walk::open_parent(root, dst_parent_rel).map_err(|e| with_path(destination, e))?;
    let flags = if options.overwrite {
        RenameFlags::empty()
    } else {
        RenameFlags::NOREPLACE
    };
    rustix::fs::renameat_with(&src_parent, src_name, &dst_parent, dst_name, flags).map_err(|e| {
        let err = io::Error::from(e);
        // An existing destination is the destination's fault; everything else names the source.
        if err.kind() == ErrorKind::AlreadyExists {
            with_path(destination, err)
        } else {
            with_path(source, err)
        }
    })
}
