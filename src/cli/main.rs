//! The `capfs` binary: `capfs serve` runs the remote executor; the other subcommands are a
//! client for a person, against a server (`--remote`) or a local sandbox (`--root`).

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use capfs::server::{self, AuditLog, Server, ServerConfig};
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, LocalFileSystem,
    RemoteFileSystem, RemoteOptions, RemoveOptions, RenameOptions, Sandbox,
};

mod mcp;
mod transfer;
use transfer::Backend;

/// A file system for AI agents' tools that cannot be escaped.
#[derive(Parser)]
#[command(name = "capfs", version, about)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

/// Which file system the client subcommands use.
#[derive(Args)]
struct Target {
    /// URL of a capfs server (ws://HOST:PORT).
    #[arg(long, global = true, env = "CAPFS_REMOTE", conflicts_with_all = ["root", "read_only"])]
    remote: Option<String>,
    /// A command (run with `sh -c`) that speaks the protocol on its stdin and stdout, such as
    /// "ssh host capfs serve --listen stdio --root /srv/ws".
    #[arg(
        long,
        global = true,
        value_name = "CMD",
        env = "CAPFS_REMOTE_COMMAND",
        conflicts_with_all = ["remote", "root", "read_only"]
    )]
    remote_command: Option<String>,
    /// A read-write sandbox root (repeatable); the client works on it directly, no server.
    #[arg(long, global = true, value_name = "DIR")]
    root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable).
    #[arg(long = "read-only", global = true, value_name = "DIR")]
    read_only: Vec<PathBuf>,
    /// A file holding the bearer token (else the CAPFS_TOKEN environment variable).
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the sandbox roots over WebSocket; prints the URL as the first line on stdout
    /// (with `--listen stdio`, serves one connection on stdin/stdout and prints nothing else).
    Serve(ServeArgs),
    /// Serve the file tools of MCP clients (those of the reference filesystem server) on
    /// stdin/stdout, confined to the roots (`capfs mcp DIR...` or --root/--read-only) or
    /// served by a capfs server (--remote, --remote-command).
    Mcp(mcp::McpArgs),
    /// List a directory (directories end in `/`, symlinks in `@`).
    Ls { path: String },
    /// Show a path's metadata.
    Stat { path: String },
    /// Write a file's contents to stdout.
    Cat { path: String },
    /// Copy a sandbox file to a local file.
    Get {
        source: String,
        destination: PathBuf,
    },
    /// Copy a local file to a sandbox path.
    Put {
        source: PathBuf,
        destination: String,
    },
    /// Copy within the sandbox.
    Cp {
        /// Copy directories with their contents.
        #[arg(short, long)]
        recursive: bool,
        source: String,
        destination: String,
    },
    /// Rename within one root.
    Mv {
        /// Replace an existing destination.
        #[arg(short = 'f', long)]
        overwrite: bool,
        source: String,
        destination: String,
    },
    /// Remove a file, a symlink or a directory.
    Rm {
        /// Remove directories with their contents.
        #[arg(short, long)]
        recursive: bool,
        /// Succeed when the path does not exist.
        #[arg(short, long)]
        force: bool,
        path: String,
    },
    /// Create a directory.
    Mkdir {
        /// Create parents too, and succeed if it exists.
        #[arg(short, long)]
        parents: bool,
        path: String,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (ws://HOST:PORT), or `stdio` for one connection on stdin/stdout.
    #[arg(long, default_value = "ws://127.0.0.1:0")]
    listen: String,
    /// Append one JSON line per request to FILE (`-` for stderr).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Largest incoming message in bytes.
    #[arg(long, default_value_t = server::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// Most simultaneous connections.
    #[arg(long, default_value_t = server::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Most requests running at once per connection.
    #[arg(long, default_value_t = server::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// Largest file fs/readFile returns, in bytes.
    #[arg(long, default_value_t = capfs::DEFAULT_READ_LIMIT)]
    read_limit: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A stdio server runs under a client's command; its progress lines would only be noise on
    // that client's terminal.
    let default_filter = match &cli.command {
        Command::Serve(args) if args.listen == "stdio" => "capfs=warn",
        Command::Mcp(_) => "capfs=warn",
        _ => "capfs=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail("starting the runtime", &e),
    };
    let result = runtime.block_on(run(cli));
    // A read of stdin still blocked in the runtime's thread pool must not keep the process.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((what, e)) => fail(&what, &e),
    }
}

fn fail(what: &str, err: &io::Error) -> ExitCode {
    eprintln!("capfs: {what}: {err}");
    ExitCode::FAILURE
}

type Failure = (String, io::Error);

fn context(what: impl Into<String>) -> impl FnOnce(io::Error) -> Failure {
    let what = what.into();
    move |e| (what, e)
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let token =
        read_token(cli.target.token_file.as_deref()).map_err(context("reading the token"))?;
    if let Command::Serve(args) = cli.command {
        return serve(&cli.target, args, token).await;
    }
    if let Command::Mcp(args) = cli.command {
        let t = cli.target;
        let target = mcp::Target {
            roots: t.root,
            read_only: t.read_only,
            remote: t.remote,
            remote_command: t.remote_command,
            token,
        };
        return mcp::run(args, target).await.map_err(context("mcp"));
    }
    let backend = open_target(&cli.target, token).await?;
    let fs = backend.file_system();
    match cli.command {
        Command::Serve(_) | Command::Mcp(_) => unreachable!("handled above"),
        Command::Ls { path } => {
            let p = sandbox_path(&path)?;
            let mut entries = fs
                .read_directory(&p)
                .await
                .map_err(context(format!("ls {path}")))?;
            entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
            let mut out = io::stdout().lock();
            for entry in entries {
                let suffix = if entry.is_symlink {
                    "@"
                } else if entry.is_directory {
                    "/"
                } else {
                    ""
                };
                writeln!(out, "{}{suffix}", entry.file_name).map_err(context("writing stdout"))?;
            }
        }
        Command::Stat { path } => {
            let p = sandbox_path(&path)?;
            let m = fs
                .get_metadata(&p)
                .await
                .map_err(context(format!("stat {path}")))?;
            let kind = if m.is_directory {
                "directory"
            } else if m.is_file {
                "file"
            } else {
                "other"
            };
            println!("path: {p}");
            println!("type: {kind}");
            println!("symlink: {}", m.is_symlink);
            println!("size: {}", m.size);
            println!("created_at_ms: {}", m.created_at_ms);
            println!("modified_at_ms: {}", m.modified_at_ms);
        }
        Command::Cat { path } => {
            let p = sandbox_path(&path)?;
            let data = fs
                .read_file(&p)
                .await
                .map_err(context(format!("cat {path}")))?;
            io::stdout()
                .lock()
                .write_all(&data)
                .map_err(context("writing stdout"))?;
        }
        Command::Get {
            source,
            destination,
        } => {
            let p = sandbox_path(&source)?;
            transfer::get(&backend, &p, &destination)
                .await
                .map_err(context(format!("get {source}")))?;
        }
        Command::Put {
            source,
            destination,
        } => {
            let p = sandbox_path(&destination)?;
            transfer::put(&backend, &source, &p)
                .await
                .map_err(context(format!("put {}", source.display())))?;
        }
        Command::Cp {
            recursive,
            source,
            destination,
        } => {
            let (s, d) = (sandbox_path(&source)?, sandbox_path(&destination)?);
            fs.copy(&s, &d, CopyOptions { recursive })
                .await
                .map_err(context(format!("cp {source} {destination}")))?;
        }
        Command::Mv {
            overwrite,
            source,
            destination,
        } => {
            let (s, d) = (sandbox_path(&source)?, sandbox_path(&destination)?);
            fs.rename(&s, &d, RenameOptions { overwrite })
                .await
                .map_err(context(format!("mv {source} {destination}")))?;
        }
        Command::Rm {
            recursive,
            force,
            path,
        } => {
            let p = sandbox_path(&path)?;
            fs.remove(&p, RemoveOptions { recursive, force })
                .await
                .map_err(context(format!("rm {path}")))?;
        }
        Command::Mkdir { parents, path } => {
            let p = sandbox_path(&path)?;
            fs.create_directory(&p, CreateDirectoryOptions { recursive: parents })
                .await
                .map_err(context(format!("mkdir {path}")))?;
        }
    }
    Ok(())
}

fn sandbox_path(path: &str) -> Result<AbsolutePathBuf, Failure> {
    AbsolutePathBuf::new(path).map_err(context("sandbox paths must be absolute"))
}

fn read_token(file: Option<&Path>) -> io::Result<Option<String>> {
    let token = match file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?,
        ),
        None => std::env::var("CAPFS_TOKEN").ok(),
    };
    match token.map(|t| t.trim().to_string()) {
        Some(t) if t.is_empty() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the token is empty",
        )),
        other => Ok(other),
    }
}

fn build_sandbox(target: &Target) -> io::Result<Sandbox> {
    let mut sandbox = Sandbox::new();
    for dir in &target.root {
        sandbox = sandbox.with_root(dir, Access::ReadWrite)?;
    }
    for dir in &target.read_only {
        sandbox = sandbox.with_root(dir, Access::ReadOnly)?;
    }
    Ok(sandbox)
}

async fn open_target(target: &Target, token: Option<String>) -> Result<Backend, Failure> {
    if let Some(command) = &target.remote_command {
        let remote = RemoteFileSystem::connect_command(command, RemoteOptions::default())
            .await
            .map_err(context("connecting through --remote-command"))?;
        return Ok(Backend::Remote(remote));
    }
    if let Some(url) = &target.remote {
        let options = RemoteOptions {
            token,
            ..RemoteOptions::default()
        };
        let remote = RemoteFileSystem::connect(url, options)
            .await
            .map_err(context(format!("connecting to {url}")))?;
        return Ok(Backend::Remote(remote));
    }
    if target.root.is_empty() && target.read_only.is_empty() {
        return Err((
            "choosing a file system".into(),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "give --remote URL (or CAPFS_REMOTE), --remote-command CMD or at least one --root DIR",
            ),
        ));
    }
    let sandbox = build_sandbox(target).map_err(context("opening the sandbox roots"))?;
    Ok(Backend::Local(LocalFileSystem::new(sandbox)))
}

async fn serve(target: &Target, args: ServeArgs, token: Option<String>) -> Result<(), Failure> {
    if target.root.is_empty() && target.read_only.is_empty() {
        return Err((
            "serve".into(),
            io::Error::new(io::ErrorKind::InvalidInput, "give at least one --root DIR"),
        ));
    }
    let stdio = args.listen == "stdio";
    let listen = if stdio {
        ServerConfig::default().listen
    } else {
        server::parse_listen_url(&args.listen).map_err(context("--listen"))?
    };
    let audit = match &args.audit_log {
        Some(path) => Some(AuditLog::open(path).map_err(context("opening the audit log"))?),
        None => None,
    };
    let sandbox = build_sandbox(target).map_err(context("opening the sandbox roots"))?;
    for root in sandbox.roots() {
        tracing::info!(root = %root.path(), access = ?root.access(), "sandbox root");
    }
    let fs = LocalFileSystem::with_read_limit(sandbox, args.read_limit);
    let config = ServerConfig {
        listen,
        token,
        max_message_bytes: args.max_message_bytes,
        max_connections: args.max_connections,
        max_in_flight: args.max_in_flight,
        audit,
    };
    if stdio {
        tracing::info!("serving one connection on stdin/stdout");
        server::serve_stdio(fs, config, shutdown_signal())
            .await
            .map_err(context("serving"))?;
        tracing::info!("stopped");
        return Ok(());
    }
    let server = Server::bind(fs, config)
        .await
        .map_err(context(format!("listening on {}", args.listen)))?;
    {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "{}", server.url())
            .and_then(|()| stdout.flush())
            .map_err(context("writing stdout"))?;
    }
    tracing::info!(url = server.url(), "listening");
    server
        .run_until(shutdown_signal())
        .await
        .map_err(context("serving"))?;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
