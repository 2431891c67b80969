//! `capfs mcp`: the file tools MCP clients call (named, shaped and annotated like the reference
//! filesystem server's), served over stdio on any [`ExecutorFileSystem`]: the local sandbox or
//! a capfs server. Every path goes through the backend, which confines it with handles; this
//! layer only turns tool arguments into paths and results into text.

mod audit;
mod ops;
mod text;
mod tools;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use clap::Args;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServiceExt};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};

pub(crate) use audit::Audited;

/// The default largest file the read tools return: 64 MiB.
const MCP_READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Arguments of `capfs mcp`.
#[derive(Args)]
pub(crate) struct McpArgs {
    /// Read-write directories, as the reference server takes them (`capfs mcp DIR...`); with
    /// --remote/--remote-command, the server's directories the tools may name (default: all
    /// the server's roots).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// A read-write sandbox root (repeatable), as a DIR argument.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable): the mutating tools refuse it.
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    /// Serve the tools on the files of a capfs server (ws://HOST:PORT or wss://HOST:PORT).
    #[arg(long, value_name = "URL", conflicts_with_all = ["root", "read_only", "remote_command"])]
    pub remote: Option<String>,
    /// Serve the tools on the files of a capfs server reached through a command (run with
    /// `sh -c`), such as "ssh host capfs serve --listen stdio --root /srv/ws".
    #[arg(long, value_name = "CMD", conflicts_with_all = ["root", "read_only"])]
    pub remote_command: Option<String>,
    /// A file holding the bearer token for --remote (else the CAPFS_TOKEN environment
    /// variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Append one JSON line per file system call to FILE (`-` for stderr), as `serve` does
    /// (local roots; a server writes its own).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["remote", "remote_command"])]
    pub audit_log: Option<PathBuf>,
    /// Largest file a read tool returns, in bytes (local roots; a server applies its own).
    /// Lower than `serve`'s default: a reply carries the whole file as JSON text, base64 for
    /// media, and no model reads more.
    #[arg(long, default_value_t = MCP_READ_LIMIT)]
    pub read_limit: u64,
}

/// A directory the tools may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Allowed {
    pub path: AbsolutePathBuf,
    pub read_only: bool,
}

/// The MCP server: the backend and the directories its tools may name.
pub(crate) struct McpServer {
    fs: Arc<dyn ExecutorFileSystem>,
    /// The roots capfs was started with; client roots can only narrow them.
    configured: Vec<Allowed>,
    /// The directories in force: `configured`, or the client's roots inside them.
    allowed: RwLock<Vec<Allowed>>,
}

impl McpServer {
    pub(crate) fn new(fs: Arc<dyn ExecutorFileSystem>, configured: Vec<Allowed>) -> Self {
        Self {
            fs,
            allowed: RwLock::new(configured.clone()),
            configured,
        }
    }

    fn allowed(&self) -> Vec<Allowed> {
        self.allowed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the client for its roots and keeps those inside a configured root (with that
    /// root's access); the others are ignored with a log line. No usable root: the configured
    /// roots stay. (Roots are deprecated by newer protocol revisions, but clients of the
    /// reference server offer them.)
    #[allow(deprecated)]
    async fn refresh_roots(&self, peer: &Peer<RoleServer>) {
        let supports_roots = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !supports_roots {
            return;
        }
        let roots = match peer.list_roots().await {
            Ok(result) => result.roots,
            Err(e) => {
                tracing::warn!("asking the client for its roots failed: {e}");
                return;
            }
        };
        let mut narrowed = Vec::new();
        for root in roots {
            match self.client_root(&root.uri) {
                Some(allowed) => narrowed.push(allowed),
                None => tracing::warn!(
                    uri = root.uri,
                    "ignoring a client root outside every configured root"
                ),
            }
        }
        if narrowed.is_empty() {
            tracing::warn!("no client root lies inside the configured roots: keeping them");
            narrowed = self.configured.clone();
        } else {
            tracing::info!(roots = ?narrowed.iter().map(|a| a.path.to_string()).collect::<Vec<_>>(), "allowed directories narrowed to the client's roots");
        }
        *self.allowed.write().unwrap_or_else(|e| e.into_inner()) = narrowed;
    }

    /// The allowed directory a client root names, when it lies inside a configured root.
    fn client_root(&self, uri: &str) -> Option<Allowed> {
        let raw = uri.strip_prefix("file://").unwrap_or(uri);
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .ok()?;
        let path = AbsolutePathBuf::new(decoded.as_ref()).ok()?;
        let root = containing(&self.configured, &path)?;
        Some(Allowed {
            path,
            read_only: root.read_only,
        })
    }
}

/// The innermost of `allowed` that holds `path`.
pub(crate) fn containing<'a>(
    allowed: &'a [Allowed],
    path: &AbsolutePathBuf,
) -> Option<&'a Allowed> {
    allowed
        .iter()
        .filter(|a| path.strip_prefix(&a.path).is_some())
        .max_by_key(|a| a.path.as_path().as_os_str().len())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new("capfs", env!("CARGO_PKG_VERSION"));
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let tool = ops::Tools {
            fs: self.fs.as_ref(),
            allowed: self.allowed(),
        };
        let result = match tool.call(&request.name, arguments).await {
            Ok(ops::Output::Text(text)) => text_result(text),
            Ok(ops::Output::Blocks { blocks, structured }) => {
                let mut result = CallToolResult::success(blocks);
                result.structured_content = Some(structured);
                result
            }
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.refresh_roots(&context.peer).await;
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.refresh_roots(&context.peer).await;
    }
}

/// A result of one text block, mirrored in `structuredContent.content`.
fn text_result(text: String) -> CallToolResult {
    let structured = serde_json::json!({ "content": text });
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// Serves `server` on stdin/stdout until the client closes them.
///
/// # Errors
///
/// A failed handshake or transport.
pub(crate) async fn serve(server: McpServer) -> io::Result<()> {
    let running = server
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| io::Error::other(format!("mcp handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| io::Error::other(format!("mcp service failed: {e}")))?;
    Ok(())
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.to_string())
}

fn read_token(file: Option<&std::path::Path>) -> io::Result<Option<String>> {
    let token = match file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?,
        ),
        None => std::env::var("CAPFS_TOKEN").ok(),
    };
    match token.map(|t| t.trim().to_string()) {
        Some(t) if t.is_empty() => Err(invalid("the token is empty")),
        other => Ok(other),
    }
}

/// The directories of a server backend: those named on the command line (each inside one of
/// the server's roots, with its access), or all the server's roots.
fn remote_allowed(dirs: &[PathBuf], remote: &capfs::RemoteFileSystem) -> io::Result<Vec<Allowed>> {
    let roots: Vec<Allowed> = remote
        .roots()
        .iter()
        .map(|r| Allowed {
            path: r.path.clone(),
            read_only: r.access == capfs::protocol::RootAccess::ReadOnly,
        })
        .collect();
    if dirs.is_empty() {
        if roots.is_empty() {
            return Err(invalid(
                "the server names no roots: give the directories the tools may use, capfs mcp --remote URL DIR...",
            ));
        }
        return Ok(roots);
    }
    dirs.iter()
        .map(|d| {
            let path = AbsolutePathBuf::new(d)?;
            if roots.is_empty() {
                return Ok(Allowed {
                    path,
                    read_only: false,
                });
            }
            match containing(&roots, &path) {
                Some(root) => Ok(Allowed {
                    read_only: root.read_only,
                    path,
                }),
                None => Err(invalid(&format!(
                    "{path}: not inside any of the server's roots"
                ))),
            }
        })
        .collect()
}

/// Runs `capfs mcp`: opens the backend, then serves the tools on stdin/stdout.
///
/// # Errors
///
/// Bad arguments, an unreachable server, a sandbox root that cannot be opened, a failed
/// transport.
pub(crate) async fn run(args: McpArgs) -> io::Result<()> {
    let remote = if let Some(command) = &args.remote_command {
        Some(
            capfs::RemoteFileSystem::connect_command(command, capfs::RemoteOptions::default())
                .await?,
        )
    } else if let Some(url) = &args.remote {
        let options = capfs::RemoteOptions {
            token: read_token(args.token_file.as_deref())?,
            ..capfs::RemoteOptions::default()
        };
        Some(capfs::RemoteFileSystem::connect(url, options).await?)
    } else {
        None
    };
    let (fs, allowed): (Arc<dyn ExecutorFileSystem>, Vec<Allowed>) = match remote {
        Some(remote) => {
            let allowed = remote_allowed(&args.dirs, &remote)?;
            (Arc::new(remote), allowed)
        }
        None => {
            let mut sandbox = capfs::Sandbox::new();
            for dir in args.dirs.iter().chain(&args.root) {
                sandbox = sandbox.with_root(dir, capfs::Access::ReadWrite)?;
            }
            for dir in &args.read_only {
                sandbox = sandbox.with_root(dir, capfs::Access::ReadOnly)?;
            }
            if sandbox.roots().is_empty() {
                return Err(invalid(
                    "give at least one directory: capfs mcp DIR... or --root DIR / --read-only DIR",
                ));
            }
            let allowed = sandbox
                .roots()
                .iter()
                .map(|r| Allowed {
                    path: r.path().clone(),
                    read_only: r.access() == capfs::Access::ReadOnly,
                })
                .collect();
            let local = capfs::LocalFileSystem::with_read_limit(sandbox, args.read_limit);
            let fs: Arc<dyn ExecutorFileSystem> = match &args.audit_log {
                Some(path) => Arc::new(Audited {
                    inner: local,
                    log: capfs::server::AuditLog::open(path)?,
                }),
                None => Arc::new(local),
            };
            (fs, allowed)
        }
    };
    for a in &allowed {
        tracing::info!(root = %a.path, read_only = a.read_only, "allowed directory");
    }
    serve(McpServer::new(fs, allowed)).await
}
