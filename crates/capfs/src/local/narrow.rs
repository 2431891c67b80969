//! Narrowing a sandbox: directories inside its roots, opened through the roots' handles, become
//! the roots of a new sandbox, so a link that leads out of one of them is an escape there, even
//! where it stays inside the wider root.

use std::io;
use std::path::PathBuf;

use super::resolve;
use crate::file_system::Narrowed;
use crate::path::AbsolutePathBuf;
use crate::roots::{RootAccess, RootDescription};
use crate::sandbox::{Access, Root, Sandbox};

/// What [`Sandbox::narrowed`] made of the directories it was asked for.
#[derive(Debug)]
#[non_exhaustive]
pub struct Narrowing {
    /// The sandbox whose roots are the directories that could be opened.
    pub sandbox: Sandbox,
    /// For each directory asked for, in order: the path of the root that now serves it and that
    /// root's access, or why it could not be opened.
    pub dirs: Vec<io::Result<(AbsolutePathBuf, Access)>>,
}

impl Sandbox {
    /// A sandbox whose roots are `dirs`: each must lie inside one of this sandbox's roots
    /// (named by the root's path or one of its [spellings](Root::spellings)) and is opened
    /// through that root's handle, following symlinks only while they stay inside it. The new
    /// root is read-only when asked so or when the root it lies in is. It is named by its path
    /// inside that root with every symlink resolved; the name it was asked by becomes one of its
    /// spellings. Directories that turn out to be the same are one root (read-only when any of
    /// them was asked to be).
    ///
    /// `Ok` guarantees that every path the new sandbox serves lies inside one of `dirs` as
    /// opened here: a symlink that leads out of it is an escape (`PermissionDenied`), wherever
    /// it leads. The roots of this sandbox stay recognised by identity in the new one: a
    /// read-only root stays read-only and no root can be removed or moved through it.
    ///
    /// # Errors
    ///
    /// The whole narrowing fails only when this sandbox's handles cannot be duplicated. Each
    /// directory that cannot be used is reported in [`Narrowing::dirs`]: `PermissionDenied` for
    /// one under no root or reached through a link that leads out of its root, `NotFound`,
    /// `NotADirectory`.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> std::io::Result<()> {
    /// use capfs::{AbsolutePathBuf, Access, Sandbox};
    ///
    /// let dir = tempfile::tempdir()?;
    /// std::fs::create_dir_all(dir.path().join("ws"))?;
    /// std::fs::create_dir_all(dir.path().join("private"))?;
    /// std::os::unix::fs::symlink("../private", dir.path().join("ws/link"))?;
    /// let wide = Sandbox::new().with_root(dir.path(), Access::ReadWrite)?;
    /// let ws = wide.roots()[0].path().join("ws")?;
    ///
    /// let narrow = wide.narrowed(&[(ws.clone(), Access::ReadWrite)])?;
    /// assert_eq!(narrow.dirs[0].as_ref().unwrap().0, ws);
    /// let through_link = narrow.sandbox.narrowed(&[(ws.join("link")?, Access::ReadWrite)])?;
    /// let refused = through_link.dirs[0].as_ref().unwrap_err();
    /// assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
    /// # Ok(()) }
    /// ```
    pub fn narrowed(&self, dirs: &[(AbsolutePathBuf, Access)]) -> io::Result<Narrowing> {
        let mut roots: Vec<Root> = Vec::new();
        let mut results = Vec::with_capacity(dirs.len());
        for (path, access) in dirs {
            let result = self.open_inside(path, *access).map(|root| {
                match roots.iter_mut().find(|r| r.id() == root.id()) {
                    Some(known) => {
                        known.add_spelling(root.path().clone());
                        for spelling in root.spellings() {
                            known.add_spelling(spelling.clone());
                        }
                        if root.access() == Access::ReadOnly {
                            known.make_read_only();
                        }
                        known.path().clone()
                    }
                    None => {
                        let name = root.path().clone();
                        roots.push(root);
                        name
                    }
                }
            });
            results.push(result);
        }
        // Accesses as they ended up once duplicates were merged.
        let dirs = results
            .into_iter()
            .map(|result| {
                result.map(|name| {
                    let root = roots.iter().find(|r| *r.path() == name);
                    let access = root.map_or(Access::ReadOnly, Root::access);
                    (name, access)
                })
            })
            .collect();
        Ok(Narrowing {
            sandbox: Sandbox::narrowing(self, roots)?,
            dirs,
        })
    }

    /// The root serving `path` by its name or by one of its spellings, and the rest of `path`.
    fn locate(&self, path: &AbsolutePathBuf) -> Option<(&Root, PathBuf)> {
        if let Some((root, rel)) = self.root_for(path) {
            return Some((root, rel.to_path_buf()));
        }
        self.roots()
            .iter()
            .flat_map(|root| root.spellings().iter().map(move |s| (root, s)))
            .filter_map(|(root, spelling)| {
                let rel = path.strip_prefix(spelling)?;
                Some((
                    root,
                    spelling.as_path().as_os_str().len(),
                    rel.to_path_buf(),
                ))
            })
            .max_by_key(|(_, len, _)| *len)
            .map(|(root, _, rel)| (root, rel))
    }

    /// Opens `path` through the handle of the root it lies in, as a root of its own.
    fn open_inside(&self, path: &AbsolutePathBuf, access: Access) -> io::Result<Root> {
        let (root, rel) = self
            .locate(path)
            .ok_or_else(|| crate::error::outside_roots(path))?;
        let named = |e: io::Error| crate::error::with_path(path, e);
        let resolved = resolve::resolve_links(root, &rel, true).map_err(named)?;
        let dir = if resolved.as_os_str().is_empty() {
            root.dir().try_clone().map_err(named)?
        } else {
            // The resolved path has no link left; one swapped in since is not followed out.
            resolve::follow(root, &resolved, true, |p| root.dir().open_dir(p)).map_err(named)?
        };
        let access = match (root.access(), access) {
            (Access::ReadWrite, Access::ReadWrite) => Access::ReadWrite,
            _ => Access::ReadOnly,
        };
        let name = root.path().join(&resolved)?;
        let mut narrowed = Root::from_dir(name, dir, access)?;
        narrowed.add_spelling(path.clone());
        Ok(narrowed)
    }
}

/// [`ExecutorFileSystem::narrowed`](crate::ExecutorFileSystem::narrowed) of a local file
/// system: its sandbox narrowed on the blocking pool (opening directories can wait on a slow
/// file system), with the same read limit.
pub(super) async fn narrowed(
    fs: &super::LocalFileSystem,
    dirs: &[RootDescription],
) -> io::Result<Narrowed> {
    let wanted: Vec<(AbsolutePathBuf, Access)> = dirs
        .iter()
        .map(|d| {
            let access = match d.access {
                RootAccess::ReadWrite => Access::ReadWrite,
                RootAccess::ReadOnly => Access::ReadOnly,
            };
            (d.path.clone(), access)
        })
        .collect();
    let narrowing = fs.run(move |inner| inner.sandbox.narrowed(&wanted)).await?;
    let roots = narrowing
        .dirs
        .into_iter()
        .map(|dir| {
            dir.map(|(path, access)| RootDescription {
                path,
                access: access.into(),
            })
        })
        .collect();
    let local = super::LocalFileSystem::with_read_limit(narrowing.sandbox, fs.read_limit());
    Ok(Narrowed {
        fs: std::sync::Arc::new(local),
        roots,
    })
}
