//! Where the views' file systems come from: the configured view opened once at the start
//! (through [`Opener`], as every command opens its file system), and each narrower view of the
//! client's roots made from it, on the local sandbox or on a connection of its own.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use capfs::audit::AuditLog;
use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem};
use capfs_wire::protocol::{RootAccess, RootDescription};
use capfs_wire::server;

use super::roots::{self, Allowed, View};
use crate::args::McpArgs;
use crate::fail::Failure;
use crate::open::{self, Opener};

/// How views are made.
pub(crate) enum Views {
    /// The local sandbox of the configured directories, audited when asked.
    Local {
        base: LocalFileSystem,
        audit: Option<AuditLog>,
    },
    /// A capfs server: every view is a connection of its own, narrowed on the server.
    Remote {
        opener: Opener,
        /// The configured directories need narrowing the server's roots (they are not all
        /// exactly roots of the server).
        narrow_configured: bool,
    },
}

/// The file system `args` name and its configured view: the directories given, each a root
/// of its own (locally, or on the server).
///
/// # Errors
///
/// Bad arguments, an unreachable server, a directory that cannot be opened (or that the
/// server cannot open as a root of its own).
pub(crate) async fn configured(args: &McpArgs) -> Result<(Views, View), Failure> {
    let dirs = args
        .dirs
        .iter()
        .chain(&args.root)
        .map(|d| (d.clone(), Access::ReadWrite))
        .chain(args.read_only.iter().map(|d| (d.clone(), Access::ReadOnly)))
        .collect();
    let opener = Opener::new(
        &args.server,
        &args.connection,
        dirs,
        "give at least one directory: capfs mcp DIR... or --root DIR / --read-only DIR",
    )?;
    if !opener.is_local() {
        // clap refuses it beside --remote; a server named by the environment must refuse it too.
        if args.audit_log.is_some() {
            return Err(Failure::usage(
                "--audit-log is for local roots: a server writes its own (capfs serve --audit-log)",
            ));
        }
        let remote = opener.connect().await?;
        let (allowed, narrow_configured) = roots::remote_configured(&args.dirs, &remote)
            .await
            .map_err(failure)?;
        let base = View {
            fs: Arc::new(remote),
            allowed,
            none_because: None,
        };
        let views = Views::Remote {
            opener,
            narrow_configured,
        };
        return Ok((views, base));
    }
    let dirs: Vec<(PathBuf, bool)> = opener
        .local_roots()
        .iter()
        .map(|(dir, access)| (dir.clone(), *access == Access::ReadOnly))
        .collect();
    let allowed = roots::resolve_configured(&dirs).map_err(failure)?;
    let resolved: Vec<(PathBuf, Access)> = allowed
        .iter()
        .map(|a| {
            let access = if a.read_only {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            (a.path.as_path().to_path_buf(), access)
        })
        .collect();
    let local = LocalFileSystem::with_read_limit(open::sandbox(&resolved)?, args.read_limit);
    let audit = match &args.audit_log {
        Some(path) => Some(AuditLog::open(path).map_err(failure)?),
        None => None,
    };
    let views = Views::Local {
        base: local.clone(),
        audit,
    };
    let base = View {
        fs: views.wrap(Arc::new(local)),
        allowed,
        none_because: None,
    };
    Ok((views, base))
}

/// A failure of `capfs mcp` that is not a usage or connection failure of the opener.
fn failure(e: io::Error) -> Failure {
    Failure::plain(e.to_string(), 1)
}

impl Views {
    pub(crate) fn wrap(&self, fs: Arc<dyn ExecutorFileSystem>) -> Arc<dyn ExecutorFileSystem> {
        match self {
            Self::Local {
                audit: Some(log), ..
            } => Arc::new(server::audited(fs, log.clone()).with_peer("mcp")),
            _ => fs,
        }
    }

    /// The view of `dirs` (each inside one of `configured`): opened as roots of their own on
    /// the configured view's handles. Directories that cannot be opened are left out with a
    /// log line.
    pub(crate) async fn narrow(
        &self,
        configured: &[Allowed],
        dirs: Vec<(AbsolutePathBuf, bool)>,
    ) -> io::Result<View> {
        let wanted: Vec<RootDescription> = dirs
            .iter()
            .map(|(path, read_only)| {
                let access = if *read_only {
                    RootAccess::ReadOnly
                } else {
                    RootAccess::ReadWrite
                };
                RootDescription::new(path.clone(), access)
            })
            .collect();
        let (fs, results): (
            Arc<dyn ExecutorFileSystem>,
            Vec<io::Result<RootDescription>>,
        ) = match self {
            Self::Local { base, .. } => {
                let narrowed = base.narrowed(&wanted).await?;
                (self.wrap(narrowed.fs), narrowed.roots)
            }
            Self::Remote {
                opener,
                narrow_configured,
            } => {
                let remote = opener
                    .connect()
                    .await
                    .map_err(|f| io::Error::other(f.message))?;
                if *narrow_configured {
                    let first: Vec<RootDescription> =
                        configured.iter().map(Allowed::description).collect();
                    for result in remote.narrow_connection(&first).await? {
                        result?;
                    }
                }
                let results = remote.narrow_connection(&wanted).await?;
                (Arc::new(remote), results)
            }
        };
        let mut allowed: Vec<Allowed> = Vec::new();
        for ((asked, _), result) in dirs.iter().zip(results) {
            match result {
                Ok(root) => {
                    let new = Allowed::from_root(&root, asked);
                    match allowed.iter_mut().find(|a| a.path == new.path) {
                        Some(known) => known.aliases.extend(new.aliases),
                        None => allowed.push(new),
                    }
                }
                Err(e) => tracing::warn!("ignoring the client root {asked}: {e}"),
            }
        }
        let none_because = allowed.is_empty().then(|| {
            "no allowed directories: none of the client's roots could be opened inside the \
             configured directories"
                .to_string()
        });
        Ok(View {
            fs,
            allowed,
            none_because,
        })
    }
}
