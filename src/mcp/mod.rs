//! `capfs mcp`: the file tools MCP clients call (named, shaped and annotated like the reference
//! filesystem server's), served over stdio on any [`ExecutorFileSystem`]: the local sandbox or
//! a capfs server. Every path goes through the backend, which confines it with handles; this
//! layer only turns tool arguments into paths and results into text.

mod bounded;
mod call;
mod fit;
mod glob;
mod http;
mod listing;
mod ops;
mod reads;
mod roots;
mod text;
mod tools;
mod tree;
mod views;
mod wire;

use std::io;
use std::sync::{Arc, RwLock};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServiceExt};

use capfs::AbsolutePathBuf;

use crate::args::McpArgs;
use crate::fail::Failure;
use roots::{Allowed, View};
use views::Views;

/// Bytes of a reply line beside its result: `{"jsonrpc":"2.0","id":...,"result":...}`.
const REPLY_ENVELOPE: usize = 1024;

/// The MCP server: how its views are made, the configured directories and the view in force.
pub(crate) struct McpServer {
    views: Arc<Views>,
    /// The directories capfs was started with; client roots can only narrow them.
    configured: Vec<Allowed>,
    /// The configured view: every view is made from its handles.
    base: View,
    /// The view in force: `base`, or the client's roots opened inside it.
    view: RwLock<View>,
}

impl McpServer {
    pub(crate) fn new(views: Arc<Views>, base: View) -> Self {
        Self {
            views,
            configured: base.allowed.clone(),
            view: RwLock::new(base.clone()),
            base,
        }
    }

    fn view(&self) -> View {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_view(&self, view: View) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = view;
    }

    /// Asks the client for its roots and opens those inside a configured directory (with its
    /// access) as roots of their own, on the configured directories' handles; the others are
    /// ignored with a log line. No usable root leaves no directory at all (every call is
    /// refused and says why), never the configured ones. (Roots are deprecated by newer
    /// protocol revisions, but clients of the reference server offer them.)
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
        let mut dirs: Vec<(AbsolutePathBuf, bool)> = Vec::new();
        let mut unusable: Vec<String> = Vec::new();
        for root in &roots {
            let path = match roots::client_root_path(&root.uri) {
                Ok(path) => roots::unalias(&self.configured, &path),
                Err(why) => {
                    tracing::warn!(uri = root.uri, "ignoring a client root: {why}");
                    unusable.push(format!("{:?}: {why}", root.uri));
                    continue;
                }
            };
            match roots::containing(&self.configured, &path) {
                Some(a) if !dirs.iter().any(|d| d.0 == path) => dirs.push((path, a.read_only)),
                Some(_) => {}
                None => tracing::warn!(
                    uri = root.uri,
                    "ignoring a client root outside every configured root"
                ),
            }
        }
        let uris: Vec<&str> = roots.iter().map(|r| r.uri.as_str()).collect();
        let view = if dirs.is_empty() {
            View {
                fs: Arc::clone(&self.base.fs),
                allowed: Vec::new(),
                none_because: Some(format!(
                    "no allowed directories: the client's roots ({}) lie outside the configured \
                     directories ({}){}",
                    if uris.is_empty() {
                        "none".to_string()
                    } else {
                        uris.join(", ")
                    },
                    self.configured
                        .iter()
                        .map(|a| a.path.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    unusable
                        .iter()
                        .map(|u| format!("; ignored {u}"))
                        .collect::<String>()
                )),
            }
        } else if dirs.len() == self.configured.len()
            && dirs
                .iter()
                .all(|(p, _)| self.configured.iter().any(|a| a.path == *p))
        {
            self.base.clone()
        } else {
            match self.views.narrow(&self.configured, dirs).await {
                Ok(view) => view,
                Err(e) => View {
                    fs: Arc::clone(&self.base.fs),
                    allowed: Vec::new(),
                    none_because: Some(format!(
                        "no allowed directories: the client's roots could not be opened: {e}"
                    )),
                },
            }
        };
        match &view.none_because {
            Some(why) => tracing::warn!("{why}"),
            None => {
                tracing::info!(roots = ?view.allowed.iter().map(|a| a.path.to_string()).collect::<Vec<_>>(), "allowed directories narrowed to the client's roots")
            }
        }
        self.set_view(view);
    }
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
        let view = self.view();
        let tool = call::Tools {
            fs: view.fs.as_ref(),
            allowed: view.allowed.clone(),
            none_because: view.none_because.clone(),
        };
        let named = arguments
            .get("path")
            .or_else(|| arguments.get("source"))
            .and_then(|p| p.as_str())
            .map(str::to_string);
        let result = match tool.call(&request.name, arguments).await {
            Ok(call::Output::Text(text)) => text_result(text),
            Ok(call::Output::Blocks { blocks, structured }) => {
                let mut result = CallToolResult::success(blocks);
                result.structured_content = Some(structured);
                result
            }
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        // Every reply stays under the limit a client reads; the read tools are bounded before
        // they read and the listings cut to it, this catches the rest (a huge diff).
        let size = serde_json::to_vec(&result).map_or(usize::MAX, |v| v.len());
        if size > reads::REPLY_LIMIT - REPLY_ENVELOPE {
            let what = named.map_or_else(
                || request.name.to_string(),
                |p| format!("{p}: {}", request.name),
            );
            let message = format!(
                "{what}: the reply would take {size} bytes, more than the {} bytes capfs mcp \
                 sends in one message; ask for less (head or tail for a file, a narrower path \
                 or excludePatterns for a listing)",
                reads::REPLY_LIMIT
            );
            return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
        }
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
    let (read, write) = rmcp::transport::io::stdio_pipes();
    let (incoming, outgoing, writer) = wire::wrap(read, write);
    let writing = tokio::spawn(writer);
    let running = server
        .serve((incoming, outgoing))
        .await
        .map_err(|e| io::Error::other(format!("mcp handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| io::Error::other(format!("mcp service failed: {e}")))?;
    // The transport is gone: the writer ends once it has written what was queued.
    writing
        .await
        .map_err(|e| io::Error::other(format!("mcp writer failed: {e}")))?
}

/// Runs `capfs mcp`: opens the file system, then serves the tools on stdin/stdout.
///
/// # Errors
///
/// Bad arguments, an unreachable server, a directory that cannot be opened (or that the
/// server cannot open as a root of its own), a failed transport; each message starts with
/// `capfs mcp:`.
pub(crate) async fn run(args: McpArgs) -> Result<(), Failure> {
    let failed = |message: String| Failure::plain(format!("capfs mcp: {message}"), 1);
    let listener = match args.listen.listen {
        Some(_) => Some(http::bind(&args).await?),
        None => None,
    };
    let (views, base) = views::configured(&args)
        .await
        .map_err(|f| failed(f.message))?;
    for a in &base.allowed {
        tracing::info!(root = %a.path, read_only = a.read_only, aliases = ?a.aliases.iter().map(ToString::to_string).collect::<Vec<_>>(), "allowed directory");
    }
    if let Some(listener) = listener {
        return listener.serve(Arc::new(views), base).await;
    }
    serve(McpServer::new(Arc::new(views), base))
        .await
        .map_err(|e| failed(e.to_string()))
}
