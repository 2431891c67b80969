//! The `capfs` binary: `capfs serve` runs the remote executor; the other subcommands are a
//! client for a person, against a server (`--remote`) or a local sandbox (`--root`).

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use tracing_subscriber::EnvFilter;

use capfs::audit::AuditLog;
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, LocalFileSystem,
    RemoveOptions, RenameOptions,
};
use capfs_wire::server::{self, Server, ServerConfig};

mod args;
mod destinations;
mod exec;
mod exec_flags;
mod fail;
mod identity;
mod listing;
mod mcp;
mod names;
mod open;
mod parse;
mod paths;
mod signals;
mod transfer;

use args::{Cli, Command, ServeArgs, Shell, Target};
use destinations::{base_name, local_destinations, remote_destinations};
use fail::{EXIT_INTERRUPTED, Failure};
use open::Opener;
use paths::Resolver;

fn main() -> ExitCode {
    // `--` ends the options and turns glob expansion off; clap swallows it, so look first.
    let globbing = !std::env::args_os().any(|a| a == "--");
    let cli = Cli::parse();
    match &cli.command {
        Command::Completions { shell } => return completions(*shell),
        Command::Man => return man_page(),
        _ => {}
    }
    init_logging(&cli);
    // One peer at a time (an MCP client on stdio, a stdio server's one connection, a person at a
    // shell) gains nothing from a second worker, and pays a cross-thread wake-up on every call:
    // every command runs on one thread, beside the blocking pool. A listening server accepts
    // here and runs its connections on threads of their own (`--threads`), one per core.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if let Command::Serve(args) = &cli.command {
        // The process's thread count has a hard bound whatever the clients do. A stdio server's
        // file work takes at most --max-blocking threads of this runtime's pool (the margin is
        // for the rest: a finished task's thread not yet idle). A listening server's file work
        // runs in the pools of its connection threads, which share the same bound; this
        // runtime only accepts (with `--threads 0` it serves the connections itself).
        let pool = if args.connection_threads() == 0 {
            args.max_blocking.saturating_add(BLOCKING_MARGIN)
        } else {
            ACCEPTOR_BLOCKING_THREADS
        };
        builder.max_blocking_threads(pool);
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(e) => return Failure::plain(format!("cannot start: {e}"), 1).report(),
    };
    let result = runtime.block_on(async move {
        if let Command::Serve(args) = cli.command {
            return serve(*args).await;
        }
        if let Command::Exec(args) = cli.command {
            return exec::run(&cli.target, args).await;
        }
        if let Command::Mcp(args) = cli.command {
            return mcp::run(*args).await;
        }
        // Dropping the command's future on a signal removes its temporary files and ends a
        // remote command's process group.
        tokio::select! {
            result = client(cli.target, cli.command, globbing) => result,
            () = shutdown_signal() => Err(Failure::plain("interrupted", EXIT_INTERRUPTED)),
        }
    });
    // A read of stdin still blocked in the runtime's thread pool must not keep the process.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

/// Blocking-pool threads `capfs serve` keeps beyond `--max-blocking`.
const BLOCKING_MARGIN: usize = 16;
/// The blocking pool of a listening server's own runtime, which does no file work.
const ACCEPTOR_BLOCKING_THREADS: usize = 2;

fn init_logging(cli: &Cli) {
    // A stdio server runs under a client's command; its progress lines would only be noise on
    // that client's terminal. A client logs only what goes wrong unless asked with -v.
    let default_filter = match &cli.command {
        Command::Serve(args) if args.listen == "stdio" => "capfs=warn",
        Command::Serve(_) => "capfs=info",
        Command::Mcp(_) => "capfs=warn",
        _ => match cli.target.verbose {
            0 => "capfs=warn",
            1 => "capfs=debug",
            _ => "capfs=trace",
        },
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .init();
}

fn completions(shell: Shell) -> ExitCode {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "capfs", &mut io::stdout());
    ExitCode::SUCCESS
}

fn man_page() -> ExitCode {
    let mut out = Vec::new();
    let rendered = clap_mangen::Man::new(Cli::command()).render(&mut out);
    match rendered.and_then(|()| io::stdout().write_all(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => Failure::at("cannot write", "stdout", &e).report(),
    }
}

async fn client(target: Target, command: Command, globbing: bool) -> Result<(), Failure> {
    let environment = Opener::for_target(&target)?.open().await?;
    let fs = environment.file_system();
    let fs: &dyn ExecutorFileSystem = fs.as_ref();
    let resolver = Resolver::new(target.cd.as_deref(), paths::roots_of(fs), globbing)?;
    let expand_all = async |args: &[String]| -> Result<Vec<AbsolutePathBuf>, Failure> {
        let mut out = Vec::new();
        for arg in args {
            out.extend(resolver.expand(fs, arg).await?);
        }
        Ok(out)
    };
    match command {
        Command::Serve(_)
        | Command::Mcp(_)
        | Command::Exec(_)
        | Command::Completions { .. }
        | Command::Man => {
            unreachable!("handled in main")
        }
        Command::Roots { json } => listing::roots(resolver.roots(), json),
        Command::Ls { long, json, paths } => {
            let paths = if paths.is_empty() {
                vec![resolver.path(".")?]
            } else {
                expand_all(&paths).await?
            };
            listing::ls(fs, &paths, long, json).await
        }
        Command::Stat { json, paths } => listing::stat(fs, &expand_all(&paths).await?, json).await,
        Command::Cat { paths } => {
            let mut files = Vec::new();
            for arg in &paths {
                if arg == "-" {
                    files.push(None);
                } else {
                    files.extend(resolver.expand(fs, arg).await?.into_iter().map(Some));
                }
            }
            transfer::cat(fs, &files).await
        }
        Command::Get {
            transfer,
            mut paths,
        } => {
            let destination = PathBuf::from(paths.pop().expect("clap requires two"));
            let sources = expand_all(&paths).await?;
            let names: Vec<OsString> = sources.iter().map(|s| base_name(s.as_path())).collect();
            let targets = local_destinations(&names, &destination)?;
            let pairs: Vec<_> = sources.into_iter().zip(targets).collect();
            transfer::get(fs, &pairs, transfer).await
        }
        Command::Put {
            transfer,
            mut paths,
        } => {
            let destination = paths.pop().expect("clap requires two");
            let sources: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
            let names: Vec<OsString> = sources.iter().map(|s| base_name(s)).collect();
            let stdin = sources.iter().any(|s| s.as_os_str() == "-");
            if stdin && sources.len() > 1 {
                return Err(Failure::usage("`-` (stdin) must be the only source"));
            }
            let targets = remote_destinations(fs, &resolver, &names, &destination).await?;
            let pairs: Vec<_> = sources.into_iter().zip(targets).collect();
            transfer::put(fs, &pairs, transfer).await
        }
        Command::Cp {
            recursive,
            mut paths,
        } => {
            let destination = paths.pop().expect("clap requires two");
            let sources = expand_all(&paths).await?;
            let names: Vec<OsString> = sources.iter().map(|s| base_name(s.as_path())).collect();
            let targets = remote_destinations(fs, &resolver, &names, &destination).await?;
            let options = CopyOptions::default().with_recursive(recursive);
            for (source, target) in sources.iter().zip(&targets) {
                fs.copy(source, target, options)
                    .await
                    .map_err(|e| Failure::at_path("cannot copy", source, &e))?;
            }
            Ok(())
        }
        Command::Mv {
            no_clobber,
            mut paths,
            ..
        } => {
            let destination = paths.pop().expect("clap requires two");
            let sources = expand_all(&paths).await?;
            let names: Vec<OsString> = sources.iter().map(|s| base_name(s.as_path())).collect();
            let targets = remote_destinations(fs, &resolver, &names, &destination).await?;
            let options = RenameOptions::default().with_overwrite(!no_clobber);
            for (source, target) in sources.iter().zip(&targets) {
                fs.rename(source, target, options)
                    .await
                    .map_err(|e| Failure::at_path("cannot move", source, &e))?;
            }
            Ok(())
        }
        Command::Rm {
            recursive,
            force,
            paths,
        } => {
            let mut failures = Vec::new();
            for arg in &paths {
                let expanded = match arg.to_str() {
                    Some(text) => resolver.expand(fs, text).await,
                    // Bytes that are not UTF-8 name one entry exactly: no glob, no lossy text.
                    None => resolver.path_os(arg).map(|path| vec![path]),
                };
                let expanded = match expanded {
                    Ok(expanded) => expanded,
                    Err(_) if force => continue,
                    Err(failure) => {
                        failures.push(failure);
                        continue;
                    }
                };
                for path in expanded {
                    let options = RemoveOptions::default()
                        .with_recursive(recursive)
                        .with_force(force);
                    if let Err(e) = fs.remove(&path, options).await {
                        failures.push(Failure::at_path("cannot remove", &path, &e));
                    }
                }
            }
            listing::first_failure(failures)
        }
        Command::Mkdir { parents, paths } => {
            let mut failures = Vec::new();
            for arg in &paths {
                let path = resolver.path(arg)?;
                let options = CreateDirectoryOptions::default().with_recursive(parents);
                if let Err(e) = fs.create_directory(&path, options).await {
                    failures.push(Failure::at_path("cannot create directory", &path, &e));
                }
            }
            listing::first_failure(failures)
        }
    }
}

async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let token = open::read_token(args.token_file.as_deref())?;
    let stdio = args.listen == "stdio";
    if stdio && args.admin_listen.is_some() {
        return Err(Failure::usage(
            "--admin-listen: a stdio server has no port for probes; it needs --listen ws://HOST:PORT",
        ));
    }
    let listen = if stdio {
        ServerConfig::default().listen
    } else {
        parse::parse_listen_url(&args.listen)
            .map_err(|e| Failure::usage(format!("--listen: {}", fail::reason(&e, ""))))?
    };
    identity::set_umask(args.umask);
    let egress = args.exec.egress()?;
    let roots = open::flag_roots(&args.root, &args.read_only);
    let sandbox = open::sandbox(&roots)?;
    let acting = identity::choose(args.user, &sandbox, args.exec.exec)?;
    let served: Vec<_> = sandbox
        .roots()
        .iter()
        .map(|root| (root.path().clone(), root.access()))
        .collect();
    let fs: std::sync::Arc<dyn ExecutorFileSystem> =
        std::sync::Arc::new(LocalFileSystem::with_read_limit(sandbox, args.read_limit));
    let max_message_bytes = usize::try_from(args.max_message_bytes)
        .map_err(|_| Failure::usage("--max-message-bytes is too large"))?;
    let mut config = ServerConfig::default()
        .with_listen(listen)
        .with_token(token)
        .with_max_message_bytes(max_message_bytes)
        .with_max_connections(args.max_connections)
        .with_max_in_flight(args.max_in_flight)
        .with_max_handshakes(args.max_handshakes)
        .with_handshake_timeout(args.handshake_timeout)
        .with_shutdown_timeout(args.shutdown_timeout)
        .with_process_grace(args.process_grace)
        .with_admin_listen(args.admin_listen)
        .with_max_blocking(args.max_blocking)
        .with_max_blocking_per_connection(args.max_blocking_per_connection)
        .with_stream_idle_timeout(args.stream_idle_timeout)
        .with_connection_threads(args.connection_threads())
        .with_poll_before_sleep(args.poll_before_sleep)
        .with_session_ttl(args.session_ttl)
        .with_max_outgoing_bytes(args.max_outgoing_bytes)
        .with_max_outgoing_bytes_per_connection(args.max_outgoing_bytes_per_connection)
        .with_max_processes(args.exec.max_processes)
        .with_max_processes_per_connection(args.exec.max_processes_per_connection)
        .with_audit(None)
        .with_processes(None)
        .with_readiness(Some(identity::readiness(acting, &served)?));
    let serving = |e: io::Error| Failure::plain(format!("serving: {}", fail::reason(&e, "")), 1);
    config
        .validate()
        .map_err(|e| Failure::usage(fail::reason(&e, "")))?;
    if args.read_limit == 0 {
        return Err(Failure::usage("--read-limit 0: must be at least 1"));
    }
    // Only once every limit passed: a refused start leaves no audit file and logs nothing else.
    if let Some(path) = &args.audit_log {
        let audit = AuditLog::open(path)
            .map_err(|e| Failure::at("cannot open audit log", &path.to_string_lossy(), &e))?;
        config.audit = Some(audit);
    }
    for (root, access) in &served {
        tracing::info!(root = %root, access = ?access, "sandbox root");
    }
    // Everything that needs root is done by now; from here on the server is the one identity
    // everything an agent causes acts as, and its processes are made as that identity.
    // Read while the server may still be root; every line an egress proxy writes goes to the
    // audit log.
    let egress = egress.map(|e| match &config.audit {
        Some(audit) => e.with_audit(audit.clone()),
        None => e,
    });
    let became = || -> Result<_, Failure> {
        identity::become_and_check(acting, &served)?;
        args.exec.processes(open::sandbox(&roots)?, egress.clone())
    };
    if stdio {
        config.processes = became()?;
        // Watched from before the line below: a signal that comes before the peer's first byte
        // stops the server too.
        let signals = signals::Signals::new();
        tracing::info!("serving one connection on stdin/stdout");
        server::serve_stdio(fs, config, signals.first())
            .await
            .map_err(serving)?;
        tracing::info!("stopped");
        return Ok(());
    }
    let mut server = Server::bind(fs, config).await.map_err(|e| {
        Failure::plain(
            format!("cannot listen on {}: {}", args.listen, fail::reason(&e, "")),
            fail::status_of(e.kind()),
        )
    })?;
    if let Some(processes) = became()? {
        server = server.with_processes(processes.0);
    }
    {
        // The WebSocket URL, then the admin URL when there is one: one line each.
        let mut stdout = io::stdout().lock();
        let admin = server.admin_url();
        writeln!(stdout, "{}", server.url())
            .and_then(|()| admin.iter().try_for_each(|url| writeln!(stdout, "{url}")))
            .and_then(|()| stdout.flush())
            .map_err(|e| Failure::at("cannot write", "stdout", &e))?;
    }
    tracing::info!(url = server.url(), admin = server.admin_url(), "listening");
    let signals = signals::Signals::new();
    let force = signals.second();
    server
        .run_until_forced(signals.first(), force)
        .await
        .map_err(serving)?;
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
