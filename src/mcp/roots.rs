//! The directories the tools may reach and the file system confined to them: the configured
//! directories, each opened as a root of its own (locally, or on the server with
//! `capfs/narrowRoots`), and the client's roots, opened the same way inside them. A change of
//! the client's roots builds a new view from the configured one, so roots only ever narrow.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::RemoteFileSystem;
use capfs_wire::protocol::{RootAccess, RootDescription};

/// A directory the tools may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Allowed {
    /// The path the backend serves it under (every symlink resolved).
    pub path: AbsolutePathBuf,
    pub read_only: bool,
    /// Other paths naming the same directory (as configured or offered through a symlink);
    /// a tool argument under one is taken as the same place under `path`.
    pub aliases: Vec<AbsolutePathBuf>,
}

impl Allowed {
    pub(crate) fn from_root(root: &RootDescription, asked: &AbsolutePathBuf) -> Self {
        let aliases = if *asked == root.path {
            Vec::new()
        } else {
            vec![asked.clone()]
        };
        Self {
            path: root.path.clone(),
            read_only: root.access == RootAccess::ReadOnly,
            aliases,
        }
    }

    pub(crate) fn description(&self) -> RootDescription {
        RootDescription::new(
            self.path.clone(),
            if self.read_only {
                RootAccess::ReadOnly
            } else {
                RootAccess::ReadWrite
            },
        )
    }
}

/// The innermost of `allowed` that holds `path` (by its path, not its aliases).
pub(crate) fn containing<'a>(
    allowed: &'a [Allowed],
    path: &AbsolutePathBuf,
) -> Option<&'a Allowed> {
    allowed
        .iter()
        .filter(|a| path.strip_prefix(&a.path).is_some())
        .max_by_key(|a| a.path.as_path().as_os_str().len())
}

/// `path` with an alias prefix replaced by the path of the directory it names (the longest
/// alias wins); `path` itself when it starts with none.
pub(crate) fn unalias(allowed: &[Allowed], path: &AbsolutePathBuf) -> AbsolutePathBuf {
    let found = allowed
        .iter()
        .flat_map(|a| a.aliases.iter().map(move |alias| (a, alias)))
        .filter_map(|(a, alias)| {
            Some((
                a,
                alias.as_path().as_os_str().len(),
                path.strip_prefix(alias)?,
            ))
        })
        .max_by_key(|(_, len, _)| *len);
    match found {
        Some((a, _, rel)) => a.path.join(rel).unwrap_or_else(|_| path.clone()),
        None => path.clone(),
    }
}

/// The directories in force and the file system confined to them.
#[derive(Clone)]
pub(crate) struct View {
    pub fs: Arc<dyn ExecutorFileSystem>,
    pub allowed: Vec<Allowed>,
    /// Why no directory is allowed, when none is.
    pub none_because: Option<String>,
}

/// The path a client root names: a `file://` URI (`file:///p` or `file://localhost/p`,
/// percent-decoded, its query and fragment dropped) or, as the reference server takes it too, a
/// plain absolute path (`/p`, taken as it is). Anything else (another scheme or host, a relative
/// path, `~`, a path holding NUL) is refused with the reason, for the log.
pub(crate) fn client_root_path(uri: &str) -> Result<AbsolutePathBuf, String> {
    let absolute = |path: &str| {
        AbsolutePathBuf::new(path).map_err(|e| format!("not a usable absolute path: {e}"))
    };
    if uri.starts_with('/') {
        return absolute(uri);
    }
    let Some(rest) = uri.strip_prefix("file://") else {
        return Err(match uri.split_once("://") {
            Some((scheme, _)) if !scheme.is_empty() => {
                format!("a {scheme}:// URI: only file:// URIs and absolute paths name directories")
            }
            _ => "neither a file:// URI nor an absolute path (relative paths are not taken)"
                .to_string(),
        });
    };
    let rest = match rest.strip_prefix("localhost") {
        Some(after) if after.starts_with('/') => after,
        _ => rest,
    };
    if !rest.starts_with('/') {
        let host = rest.split('/').next().unwrap_or(rest);
        return Err(format!(
            "a file:// URI naming the host {host:?}: only local paths (file:///p, \
             file://localhost/p) are taken"
        ));
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let decoded = percent_encoding::percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| "a file:// URI whose path is not UTF-8 once percent-decoded".to_string())?;
    absolute(decoded.as_ref())
}

/// The configured local directories, each resolved once (symlinks and all), with the spelling
/// it was given as an alias; a directory named twice is one (read-only if either says so),
/// with a log line.
pub(crate) fn resolve_configured(dirs: &[(PathBuf, bool)]) -> io::Result<Vec<Allowed>> {
    let mut out: Vec<Allowed> = Vec::new();
    for (dir, read_only) in dirs {
        let canonical = std::fs::canonicalize(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let path = AbsolutePathBuf::new(&canonical)?;
        let given = AbsolutePathBuf::new(std::path::absolute(dir)?)?;
        let aliases: Vec<AbsolutePathBuf> = (given != path).then_some(given).into_iter().collect();
        match out.iter_mut().find(|a| a.path == path) {
            Some(known) => {
                tracing::info!(
                    dir = %dir.display(),
                    root = %known.path,
                    "a directory named twice is one allowed directory"
                );
                known.read_only |= read_only;
                for alias in aliases {
                    if !known.aliases.contains(&alias) {
                        known.aliases.push(alias);
                    }
                }
            }
            None => out.push(Allowed {
                path,
                read_only: *read_only,
                aliases,
            }),
        }
    }
    Ok(out)
}

/// The configured directories of a server backend: `dirs` (absolute, the server's paths)
/// opened as roots of their own on the server when it can narrow, else checked against its
/// roots by name; without `dirs`, all the server's roots. Returns them and whether they needed
/// narrowing.
pub(crate) async fn remote_configured(
    dirs: &[PathBuf],
    remote: &RemoteFileSystem,
) -> io::Result<(Vec<Allowed>, bool)> {
    let roots = remote.roots();
    if dirs.is_empty() {
        if roots.is_empty() {
            return Err(invalid(
                "the server names no roots: give the directories the tools may use, capfs mcp --remote URL DIR...",
            ));
        }
        let all = roots
            .iter()
            .map(|r| Allowed::from_root(r, &r.path))
            .collect();
        return Ok((all, false));
    }
    let mut asked: Vec<AbsolutePathBuf> = Vec::new();
    for dir in dirs {
        let path = AbsolutePathBuf::new(dir)?;
        if asked.contains(&path) {
            tracing::info!(dir = %path, "a directory named twice is one allowed directory");
        } else {
            asked.push(path);
        }
    }
    let exact = asked.iter().all(|p| roots.iter().any(|r| r.path == *p));
    if exact {
        let all = asked
            .iter()
            .filter_map(|p| roots.iter().find(|r| r.path == *p))
            .map(|r| Allowed::from_root(r, &r.path))
            .collect();
        return Ok((all, false));
    }
    if !remote.supports_narrowing() {
        if !roots.is_empty() {
            return Err(invalid(&format!(
                "{}: not one of the server's roots, and the server cannot narrow its roots to it \
                 (a newer capfs serve can): give the server's own roots",
                asked[0]
            )));
        }
        // A server that names no roots (not capfs): its paths are taken by name.
        tracing::warn!(
            "the server names no roots and cannot narrow them: the directories only filter paths by name"
        );
        let all = asked
            .iter()
            .map(|p| Allowed {
                path: p.clone(),
                read_only: false,
                aliases: Vec::new(),
            })
            .collect();
        return Ok((all, false));
    }
    let wanted: Vec<RootDescription> = asked
        .iter()
        .map(|p| RootDescription::new(p.clone(), RootAccess::ReadWrite))
        .collect();
    let results = remote.narrow_connection(&wanted).await?;
    let mut all: Vec<Allowed> = Vec::new();
    for (asked, result) in asked.iter().zip(results) {
        let root = result.map_err(|e| invalid(&format!("{asked}: {e}")))?;
        let new = Allowed::from_root(&root, asked);
        match all.iter_mut().find(|a| a.path == new.path) {
            Some(known) => known.aliases.extend(new.aliases),
            None => all.push(new),
        }
    }
    Ok((all, true))
}

pub(crate) fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_roots_name_local_absolute_paths_only() {
        let p = |s: &str| client_root_path(s).ok().map(|p| p.to_string());
        assert_eq!(p("file:///ws/a").as_deref(), Some("/ws/a"));
        assert_eq!(p("file://localhost/ws/a").as_deref(), Some("/ws/a"));
        assert_eq!(p("file:///ws/a%20b/").as_deref(), Some("/ws/a b"));
        assert_eq!(p("file:///ws/%2e%2e/etc").as_deref(), Some("/etc"));
        assert_eq!(p("file:///ws/a?x#y").as_deref(), Some("/ws/a"));
        assert_eq!(p("file://other/ws"), None);
        assert_eq!(p("https://x/ws"), None);
        assert_eq!(p("file:///ws/%ff"), None);
    }

    #[test]
    fn plain_absolute_paths_are_roots_taken_as_they_are() {
        let p = |s: &str| client_root_path(s).map(|p| p.to_string());
        assert_eq!(p("/srv/ws").as_deref(), Ok("/srv/ws"));
        assert_eq!(p("/srv/ws/").as_deref(), Ok("/srv/ws"));
        assert_eq!(p("/").as_deref(), Ok("/"));
        // No decoding, no query: the name is the path.
        assert_eq!(p("/srv/a%20b?c#d").as_deref(), Ok("/srv/a%20b?c#d"));
        assert_eq!(p("/srv/ws/../etc").as_deref(), Ok("/srv/etc"));
    }

    #[test]
    fn roots_that_name_no_local_absolute_path_are_refused_with_a_reason() {
        for (root, reason) in [
            ("ws", "relative paths are not taken"),
            ("./ws", "relative paths are not taken"),
            ("../ws", "relative paths are not taken"),
            ("~/ws", "relative paths are not taken"),
            ("", "relative paths are not taken"),
            ("C:\\ws", "relative paths are not taken"),
            ("file:ws", "relative paths are not taken"),
            ("https://x/ws", "a https:// URI"),
            ("file://other/ws", "the host \"other\""),
            ("file://ws", "the host \"ws\""),
            ("/srv/a\0b", "NUL"),
            ("file:///srv/a%00b", "NUL"),
        ] {
            let err = client_root_path(root).expect_err(root);
            assert!(err.contains(reason), "{root:?}: {err}");
        }
    }

    #[test]
    fn aliases_map_onto_the_directory_they_name() {
        let a = |s: &str| AbsolutePathBuf::new(s).unwrap();
        let allowed = vec![Allowed {
            path: a("/real/ws"),
            read_only: false,
            aliases: vec![a("/link"), a("/link/deeper")],
        }];
        assert_eq!(unalias(&allowed, &a("/link/x")), a("/real/ws/x"));
        assert_eq!(unalias(&allowed, &a("/link")), a("/real/ws"));
        assert_eq!(unalias(&allowed, &a("/linkx")), a("/linkx"));
        assert_eq!(unalias(&allowed, &a("/other")), a("/other"));
    }
}
