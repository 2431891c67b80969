//! `capfs/narrowRoots`: one connection's roots narrowed to directories inside them. The
//! connection's file system is replaced by [`ExecutorFileSystem::narrowed`]'s, so every later
//! request on it is confined to those directories on handles; other connections keep theirs.
//! Applied to what the connection already serves, so it only ever narrows.

use std::sync::Arc;

use serde_json::Value;

use super::params::{CallParams, take};
use crate::protocol::{ErrorObject, NarrowRootsParams, NarrowRootsResponse, NarrowedRoot};
use capfs::ExecutorFileSystem;

/// Narrows `fs` (the connection's file system) as `params` ask and returns the reply. On an
/// error nothing changes; otherwise `fs` serves the directories that could be opened, and
/// nothing when none could.
pub(crate) async fn narrow_connection(
    fs: &mut Arc<dyn ExecutorFileSystem>,
    params: CallParams,
) -> Result<Value, ErrorObject> {
    let params: NarrowRootsParams = take(params, None)?;
    let narrowed = fs
        .narrowed(&params.roots)
        .await
        .map_err(|e| ErrorObject::from_io(&e))?;
    let roots = narrowed
        .roots
        .into_iter()
        .map(|result| match result {
            Ok(root) => NarrowedRoot {
                root: Some(root),
                error: None,
            },
            Err(e) => NarrowedRoot {
                root: None,
                error: Some(e.to_string()),
            },
        })
        .collect();
    *fs = narrowed.fs;
    let response = NarrowRootsResponse { roots };
    Ok(serde_json::to_value(response).expect("protocol results always serialize"))
}
