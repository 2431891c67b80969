//! Where each source of `get`, `put`, `cp` and `mv` lands, decided as cp decides: into the
//! destination when it is a directory, else at the destination itself.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};

use crate::fail::{self, Failure};
use crate::names::quote;
use crate::paths::Resolver;

/// The last component a copy into a directory keeps; none for `-` (stdin), which cannot go
/// into a directory without a name.
pub(crate) fn base_name(path: &Path) -> OsString {
    if path.as_os_str() == "-" {
        return OsString::new();
    }
    path.file_name().map(OsString::from).unwrap_or_default()
}

/// Where each source lands, as cp decides: into `destination` when it is a directory (it must
/// be with several sources or a trailing `/`), else at `destination` itself.
fn plan_destinations<P>(
    names: &[OsString],
    shown: &str,
    is_directory: bool,
    join: impl Fn(&OsString) -> Result<P, Failure>,
    itself: P,
) -> Result<Vec<P>, Failure> {
    let not_a_directory = || Failure::usage(format!("target {} is not a directory", quote(shown)));
    if is_directory {
        return names
            .iter()
            .map(|name| {
                if name.is_empty() {
                    Err(Failure::usage(format!(
                        "{} is a directory: name the file to write",
                        quote(shown)
                    )))
                } else {
                    join(name)
                }
            })
            .collect();
    }
    if names.len() > 1 || shown.ends_with('/') {
        return Err(not_a_directory());
    }
    Ok(vec![itself])
}

pub(crate) fn local_destinations(
    names: &[OsString],
    destination: &Path,
) -> Result<Vec<PathBuf>, Failure> {
    let shown = destination.to_string_lossy();
    if destination.as_os_str() == "-" {
        if names.len() > 1 {
            return Err(Failure::usage("`-` (stdout) takes only one source"));
        }
        return Ok(vec![destination.to_path_buf()]);
    }
    let is_directory = std::fs::metadata(destination).is_ok_and(|m| m.is_dir());
    plan_destinations(
        names,
        &shown,
        is_directory,
        |name| Ok(destination.join(name)),
        destination.to_path_buf(),
    )
}

pub(crate) async fn remote_destinations(
    fs: &dyn ExecutorFileSystem,
    resolver: &Resolver,
    names: &[OsString],
    destination: &str,
) -> Result<Vec<AbsolutePathBuf>, Failure> {
    let mut matches = resolver.expand(fs, destination).await?;
    if matches.len() != 1 {
        return Err(Failure::usage(format!(
            "target {} matches {} paths",
            quote(destination),
            matches.len()
        )));
    }
    let target = matches.remove(0);
    let is_directory = fs.get_metadata(&target).await.is_ok_and(|m| m.is_directory);
    plan_destinations(
        names,
        destination,
        is_directory,
        |name| {
            target
                .join(name)
                .map_err(|e| Failure::usage(fail::reason(&e, "")))
        },
        target.clone(),
    )
}
