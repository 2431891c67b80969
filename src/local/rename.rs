//! `rename`: one atomic `renameat` (or `renameat2(RENAME_NOREPLACE)`) between two parent handles
//! of the same root.

use std::io::{self, ErrorKind};

use rustix::fs::RenameFlags;

use super::Inner;
use super::walk;
use crate::error::{self, with_path};
use crate::{AbsolutePathBuf, RenameOptions};

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
    for (parent, path) in [(&src_parent, source), (&dst_parent, destination)] {
        walk::require_writable_dir(&fs.sandbox, src.root, parent, path)?;
    }
    for (parent, name, path) in [
        (&src_parent, src_name, source),
        (&dst_parent, dst_name, destination),
    ] {
        if walk::holds_a_root(&fs.sandbox, parent, name).map_err(|e| with_path(path, e))? {
            return Err(error::root_protected(path));
        }
    }
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
