//! The command line, all of it: the clap definitions and the environment fallbacks. The
//! commands read these; nothing here reads the commands (only the value parsers).

use clap::{Args, Parser, Subcommand, ValueEnum};

mod exec;
mod mcp;
mod mcp_listen;
mod serve;
mod target;

pub use exec::ExecArgs;
pub use mcp::McpArgs;
pub use serve::ServeArgs;
pub use target::{Connection, Endpoint, Server, Target};

/// Exit statuses, as documented in `capfs --help`.
pub const AFTER_HELP: &str = "\
Environment (used only when no --remote, --remote-command, --root or --read-only is given):
  CAPFS_REMOTE          URL of a capfs server, as --remote
  CAPFS_REMOTE_COMMAND  a command, as --remote-command
  CAPFS_TOKEN           the bearer token, unless --token-file is given
  RUST_LOG              log filter, for example capfs=debug

Relative paths are resolved against --cd DIR, or against the only root when there is one.
Remote paths may hold glob patterns (*, ?, [...]); `--` turns their expansion off.

Exit status: 0 success, 1 other failure, 2 usage error, 3 not found, 4 permission denied,
5 connection failure, 130 interrupted, 141 stdout closed by its reader.";

/// A file system for AI agents' tools that cannot be escaped.
#[derive(Parser)]
#[command(name = "capfs", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub target: Target,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the sandbox roots over WebSocket; prints the URL as the first line on stdout
    /// (with `--listen stdio`, serves one connection on stdin/stdout and prints nothing else).
    Serve(Box<ServeArgs>),
    /// Serve the file tools of MCP clients (those of the reference filesystem server) on
    /// stdin/stdout, confined to the roots (`capfs mcp DIR...`, --root, --read-only) or served
    /// by a capfs server (--remote, --remote-command).
    Mcp(Box<McpArgs>),
    /// Run one command in the sandbox, like `ssh host cmd`: through a server's processes
    /// (--remote, `capfs serve --exec`) or confined here to --root; its exit status is the
    /// command's.
    Exec(ExecArgs),
    /// List the sandbox roots and their access.
    Roots {
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List directories (directories end in `/`, symlinks in `@`), or name files.
    Ls {
        /// Long listing: type and mode, size, modification time, `-> target` for links.
        #[arg(short = 'l', long = "long")]
        long: bool,
        /// One JSON document instead of text (raw values).
        #[arg(long)]
        json: bool,
        /// Sandbox paths to list (default: the current directory, see --cd).
        paths: Vec<String>,
    },
    /// Show paths' metadata.
    Stat {
        /// One JSON document instead of text (raw values).
        #[arg(long)]
        json: bool,
        /// Sandbox paths.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Write files' contents to stdout (`-` copies stdin).
    Cat {
        /// Sandbox files.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Copy sandbox files to local files (`-` as the destination: stdout).
    Get {
        #[command(flatten)]
        transfer: TransferArgs,
        /// Sandbox files (directories with -r), then the local destination; with several
        /// sources the destination is a directory.
        #[arg(required = true, num_args = 2.., value_name = "SOURCE... DEST")]
        paths: Vec<String>,
    },
    /// Copy local files to sandbox paths (`-` as the source: stdin).
    Put {
        #[command(flatten)]
        transfer: TransferArgs,
        /// Local files (directories with -r), then the sandbox destination; with several
        /// sources the destination is a directory.
        #[arg(required = true, num_args = 2.., value_name = "SOURCE... DEST")]
        paths: Vec<String>,
    },
    /// Copy within the sandbox, like cp.
    Cp {
        /// Copy directories with their contents.
        #[arg(short, long)]
        recursive: bool,
        /// Sandbox sources, then the destination (a directory when there are several).
        #[arg(required = true, num_args = 2.., value_name = "SOURCE... DEST")]
        paths: Vec<String>,
    },
    /// Rename or move within one root, like mv (an existing destination file is replaced).
    Mv {
        /// Replace an existing destination (the default; kept for habit).
        #[arg(short = 'f', long, overrides_with = "no_clobber")]
        force: bool,
        /// Never replace an existing destination.
        #[arg(short = 'n', long)]
        no_clobber: bool,
        /// Sandbox sources, then the destination (a directory when there are several).
        #[arg(required = true, num_args = 2.., value_name = "SOURCE... DEST")]
        paths: Vec<String>,
    },
    /// Remove files, symlinks or directories.
    Rm {
        /// Remove directories with their contents.
        #[arg(short, long)]
        recursive: bool,
        /// Succeed when a path does not exist.
        #[arg(short, long)]
        force: bool,
        /// Sandbox paths (a name that is not UTF-8, as `ls` shows it escaped and a shell
        /// pastes it back, is taken literally).
        #[arg(required = true)]
        paths: Vec<std::ffi::OsString>,
    },
    /// Create directories.
    Mkdir {
        /// Create parents too, and succeed if it exists.
        #[arg(short, long)]
        parents: bool,
        /// Sandbox paths.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Print the manual page (roff).
    Man,
}

/// Shells `capfs completions` writes scripts for.
#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Flags of `get` and `put`.
#[derive(Args, Clone, Copy)]
pub struct TransferArgs {
    /// Copy directories with their contents (symlinks as links; special files skipped).
    #[arg(short, long)]
    pub recursive: bool,
    /// Keep modification times too (permission bits are always kept).
    #[arg(short, long)]
    pub preserve: bool,
    /// No progress display and no summary.
    #[arg(short, long)]
    pub quiet: bool,
}
