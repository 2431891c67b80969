//! What a walk through a server lacks when the server predates some of `capfs/walk`'s
//! members: asked for and left out, each is fetched the way a walk by listing fetches it.

use capfs::{AbsolutePathBuf, ExecutorFileSystem, FileSystemResult, Walk, WalkOptions};

/// Fills in, for each entry of `walk` (below `top`), the metadata and link text `options`
/// asked for and the server left out: one `get_metadata` per entry but links without
/// metadata, one `read_link` per link without text. A call that fails leaves its part unknown,
/// as it does in a walk by listing.
pub(super) async fn complete<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    top: &AbsolutePathBuf,
    walk: &mut Walk,
    options: &WalkOptions,
) -> FileSystemResult<()> {
    for entry in &mut walk.entries {
        let wants_metadata = options.metadata && !entry.is_symlink && entry.mode.is_none();
        let wants_link = options.link_targets && entry.is_symlink && entry.link_target.is_none();
        if !wants_metadata && !wants_link {
            continue;
        }
        let path = top.join(&entry.path)?;
        if wants_metadata && let Ok(m) = fs.get_metadata(&path).await {
            entry.mode = Some(m.mode);
            entry.modified_at_ms = Some(m.modified_at_ms);
        }
        if wants_link {
            entry.link_target = fs.read_link(&path).await.ok();
        }
    }
    Ok(())
}
