//! The flags of `capfs mcp`: its directories, the same server flags as the client's, and its
//! own limits.

use std::path::PathBuf;

use clap::Args;

use super::mcp_listen::Listen;
use super::target::{Connection, Server};

/// The default largest file the read tools return: 64 MiB.
const MCP_READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Arguments of `capfs mcp`.
#[derive(Args)]
pub struct McpArgs {
    /// Read-write directories, as the reference server takes them (`capfs mcp DIR...`), each a
    /// root of its own; with --remote/--remote-command, directories on the server, each opened
    /// there as a root of its own (default: all the server's roots).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// A read-write sandbox root (repeatable), as a DIR argument.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable): the mutating tools refuse it.
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    #[command(flatten)]
    pub server: Server,
    #[command(flatten)]
    pub connection: Connection,
    /// Append one JSON line per file system call to FILE (`-` for stderr), as `serve` does
    /// (local roots; a server writes its own).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["remote", "remote_command"])]
    pub audit_log: Option<PathBuf>,
    /// Largest file a read tool returns, in bytes (local roots; a server applies its own).
    /// Every reply is also held to 8 MiB (what MCP clients read in one message), which bounds
    /// reads further: about 4 MiB of text, 3 MiB of media.
    #[arg(long, default_value_t = MCP_READ_LIMIT)]
    pub read_limit: u64,
    #[command(flatten)]
    pub listen: Listen,
}
