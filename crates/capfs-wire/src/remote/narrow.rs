//! Narrowing the connection's roots on the server (`capfs/narrowRoots`).

use std::io;

use super::handle::RemoteFileSystem;
use crate::protocol::{
    CAPFS_NARROW_ROOTS_METHOD, NarrowRootsParams, NarrowRootsResponse, RootDescription,
};
use capfs::AbsolutePathBuf;

impl RemoteFileSystem {
    /// True when the server can narrow this connection's roots
    /// ([`narrow_connection`](Self::narrow_connection)).
    pub fn supports_narrowing(&self) -> bool {
        self.client.narrow_roots
    }

    /// Asks the server to serve this connection only the directories `dirs`, each inside its
    /// roots and opened there as a root of its own, so that a symlink leading out of one of
    /// them is refused as an escape even where the server's own root reaches further. Every
    /// later call on this connection (and on its clones) is confined to them; the server's other
    /// connections are not affected. Only narrows: directories outside what the connection
    /// serves are refused, and when none can be used the connection serves nothing.
    ///
    /// Returns, for each directory in order, the root now serving it (the directory's path with
    /// its symlinks resolved, and its access), or why it could not be used.
    /// [`roots`](Self::roots) still lists what the server announced at the handshake.
    ///
    /// # Errors
    ///
    /// `Unsupported` when the server does not offer narrowing (see
    /// [`supports_narrowing`](Self::supports_narrowing)); the server's error, or
    /// `BrokenPipe`, when the request fails: the connection's roots are then as they were.
    pub async fn narrow_connection(
        &self,
        dirs: &[RootDescription],
    ) -> io::Result<Vec<io::Result<RootDescription>>> {
        let first = dirs
            .first()
            .map_or_else(|| AbsolutePathBuf::new("/"), |d| Ok(d.path.clone()))?;
        if !self.client.narrow_roots {
            return Err(crate::error::narrowing_unsupported(&first));
        }
        let params = NarrowRootsParams {
            roots: dirs.to_vec(),
        };
        let response: NarrowRootsResponse = self
            .client
            .capfs_call(
                CAPFS_NARROW_ROOTS_METHOD,
                params,
                &first,
                "narrowing its roots",
            )
            .await?;
        if response.roots.len() != dirs.len() {
            return Err(crate::error::narrowed_count(
                response.roots.len(),
                dirs.len(),
            ));
        }
        Ok(response
            .roots
            .into_iter()
            .zip(dirs)
            .map(|(narrowed, asked)| match (narrowed.root, narrowed.error) {
                (Some(root), None) => Ok(root),
                (_, error) => Err(crate::error::narrowing_refused(&asked.path, error)),
            })
            .collect())
    }
}
