//! `fs/canonicalize`: a path with every symlink resolved, found through the trait one component
//! at a time from the root that serves it. Each step is a confined lookup, so a link that leads
//! out of every root fails as `PermissionDenied` without saying where it leads.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// Links followed in one resolution before it fails, as the kernel's `ELOOP` bound.
const MAX_LINKS: usize = 40;

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            _ => None,
        })
        .collect()
}

/// The root among `roots` that serves `path`, and the components of `path` below it.
fn split_at_root(
    roots: &[AbsolutePathBuf],
    path: &AbsolutePathBuf,
) -> io::Result<(AbsolutePathBuf, VecDeque<OsString>)> {
    if roots.is_empty() {
        return Ok((AbsolutePathBuf::new("/")?, components(path.as_path())));
    }
    let root = roots
        .iter()
        .filter(|root| path.as_path().starts_with(root.as_path()))
        .max_by_key(|root| root.as_path().as_os_str().len())
        .ok_or_else(|| capfs::error::outside_roots(path))?;
    let rest = path
        .as_path()
        .strip_prefix(root.as_path())
        .map(components)
        .unwrap_or_default();
    Ok((root.clone(), rest))
}

/// `path` with every symlink resolved; `..` in link texts is resolved lexically against the
/// directory the link is in, which is itself already resolved.
pub(crate) async fn canonicalize(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
) -> io::Result<AbsolutePathBuf> {
    let roots: Vec<AbsolutePathBuf> = fs.served_roots().into_iter().map(|r| r.path).collect();
    let (mut resolved, mut pending) = split_at_root(&roots, path)?;
    // The root itself must exist and be served, as any other path must.
    fs.get_metadata(&resolved).await?;
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        let candidate = resolved.join(&name)?;
        let metadata = fs.get_metadata(&candidate).await?;
        if !metadata.is_symlink {
            resolved = candidate;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(crate::error::too_many_links(path));
        }
        let target = fs.read_link(&candidate).await?;
        let mut expanded = resolved.join(&target)?;
        for rest in &pending {
            expanded = expanded.join(rest)?;
        }
        (resolved, pending) = split_at_root(&roots, &expanded)?;
    }
    Ok(resolved)
}
