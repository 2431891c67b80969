//! The command line: clap definitions, the environment fallbacks, and the value parsers
//! (sizes with suffixes, durations).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

/// Which file system the client subcommands use (before the subcommand name).
#[derive(Args)]
pub struct Target {
    /// URL of a capfs server (ws://HOST:PORT or wss://HOST:PORT) [env: CAPFS_REMOTE].
    #[arg(long, value_name = "URL", conflicts_with_all = ["root", "read_only", "remote_command"])]
    pub remote: Option<String>,
    /// A command (run with `sh -c`) that speaks the protocol on its stdin and stdout, such as
    /// "ssh host capfs serve --listen stdio --root /srv/ws" [env: CAPFS_REMOTE_COMMAND].
    #[arg(long, value_name = "CMD", conflicts_with_all = ["root", "read_only"])]
    pub remote_command: Option<String>,
    /// A read-write sandbox root (repeatable); the client works on it directly, no server.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable).
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    /// A file holding the bearer token (else the CAPFS_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A PEM file of certificate authorities trusted for wss:// besides the platform's.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Give up connecting (and the remote command's handshake) after this long: 10s, 500ms, 2m.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Give up on a call the server does not answer within this long (streamed transfers are
    /// bounded by --stream-idle-timeout instead).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_timeout)]
    pub call_timeout: Duration,
    /// Give up on a streamed get, put or cat that makes no progress for this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_timeout)]
    pub stream_idle_timeout: Duration,
    /// Longest message (and WebSocket frame) accepted from the server: 64M, 1G.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_message_size)]
    pub max_message_bytes: usize,
    /// The sandbox directory relative paths start from.
    #[arg(long = "cd", value_name = "DIR")]
    pub cd: Option<String>,
    /// Log each call and its time on stderr (-vv for more).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Where the client's file system comes from, after the environment fallbacks.
pub enum Endpoint {
    Url(String),
    Command(String),
    Local,
}

impl Target {
    /// The flags when given, else `CAPFS_REMOTE_COMMAND` or `CAPFS_REMOTE`: a flag always wins
    /// over the environment.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        if let Some(url) = &self.remote {
            return Ok(Endpoint::Url(url.clone()));
        }
        if let Some(command) = &self.remote_command {
            return Ok(Endpoint::Command(command.clone()));
        }
        if !self.root.is_empty() || !self.read_only.is_empty() {
            return Ok(Endpoint::Local);
        }
        let env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        match (env("CAPFS_REMOTE"), env("CAPFS_REMOTE_COMMAND")) {
            (Some(_), Some(_)) => Err(
                "both CAPFS_REMOTE and CAPFS_REMOTE_COMMAND are set; unset one or give a flag"
                    .into(),
            ),
            (Some(url), None) => Ok(Endpoint::Url(url)),
            (None, Some(command)) => Ok(Endpoint::Command(command)),
            (None, None) => Err(
                "no file system: give --remote URL (or CAPFS_REMOTE), --remote-command CMD \
                 or --root DIR"
                    .into(),
            ),
        }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the sandbox roots over WebSocket; prints the URL as the first line on stdout
    /// (with `--listen stdio`, serves one connection on stdin/stdout and prints nothing else).
    Serve(ServeArgs),
    /// Serve the file tools of MCP clients (those of the reference filesystem server) on
    /// stdin/stdout, confined to the roots (`capfs mcp DIR...`, --root, --read-only) or served
    /// by a capfs server (--remote, --remote-command).
    Mcp(crate::mcp::McpArgs),
    /// Run one command in the sandbox, like `ssh host cmd`: through a server's processes
    /// (--remote, `capfs serve --exec`) or confined here to --root; its exit status is the
    /// command's.
    Exec(crate::exec::ExecArgs),
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

#[derive(Args)]
pub struct ServeArgs {
    /// A read-write sandbox root (repeatable).
    #[arg(long, value_name = "DIR", required_unless_present = "read_only")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable).
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    /// A file holding the bearer token clients must send (else the CAPFS_TOKEN environment
    /// variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Address to listen on (ws://HOST:PORT), or `stdio` for one connection on stdin/stdout.
    #[arg(long, default_value = "ws://127.0.0.1:0")]
    pub listen: String,
    /// Append one JSON line per request to FILE (`-` for stderr).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Largest incoming message (bytes; suffixes K, M, G).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub max_message_bytes: u64,
    /// Most simultaneous connections past their handshake.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Most requests running at once per connection.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Most connections still in their handshake, apart from --max-connections.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_HANDSHAKES)]
    pub max_handshakes: usize,
    /// Time a connection has to complete its handshake (seconds, or with a unit: 500ms, 10s).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Time connections get to finish at shutdown; then they are cut and the exit status is 1.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Most requests doing file-system work at once across the server.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_BLOCKING)]
    pub max_blocking: usize,
    /// Most requests doing file-system work at once on one connection.
    #[arg(
        long,
        value_name = "N",
        default_value_t = capfs_wire::server::DEFAULT_MAX_BLOCKING_PER_CONNECTION
    )]
    pub max_blocking_per_connection: usize,
    /// Threads that serve connections, each connection staying on one; 0 serves them all on
    /// the accepting thread [default: one per core].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Time a streamed read or write may make no progress before it fails (seconds, or with a
    /// unit: 500ms, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub stream_idle_timeout: Duration,
    /// How long a session outlives its connection: a codex client that reconnects within it
    /// (`resumeSessionId`) gets its session back.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub session_ttl: Duration,
    /// Largest file a whole-file read (fs/readFile) returns (bytes; suffixes K, M, G);
    /// streamed reads are not bound by it.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = parse_size)]
    pub read_limit: u64,
    /// Most bytes replies and data frames may hold across the server until their sockets take
    /// them (suffixes K, M, G); each connection also has 1 MiB of its own.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = parse_size)]
    pub max_outgoing_bytes: u64,
    /// Most of that one connection may hold; a larger reply fails at once (suffixes K, M, G).
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = parse_size)]
    pub max_outgoing_bytes_per_connection: u64,
    /// Processes: --exec and its policy.
    #[command(flatten)]
    pub exec: crate::exec_flags::ExecFlags,
}

impl ServeArgs {
    /// Threads that run the connections: none (the command's own runtime) for a stdio
    /// server's one connection and for `--threads 0`, else `--threads` or one per core.
    pub fn connection_threads(&self) -> usize {
        if self.listen == "stdio" {
            return 0;
        }
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}

/// A size flag's value: bytes, or a number with a K, M, G or T suffix (`64M`, `1G`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    crate::parse::parse_size(text).map_err(|e| e.to_string())
}

/// A client timeout: a duration that is not zero.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err("must be more than 0".to_string()),
        timeout => Ok(timeout),
    }
}

/// The client's message limit: from 4 KiB (an `initialize` reply fits) to 4 GiB.
fn parse_message_size(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    if !(4 << 10..=4 << 30).contains(&size) {
        return Err("must be from 4K to 4G".to_string());
    }
    usize::try_from(size).map_err(|_| "too large for this machine".to_string())
}

/// A duration flag's value: seconds, or a number with a unit (`500ms`, `10s`, `2m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::parse::parse_duration(text).map_err(|e| e.to_string())
}
