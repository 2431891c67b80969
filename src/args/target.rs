//! Which file system a command works on: local roots, or a capfs server and how to reach it.
//! `Server` and `Connection` are shared by the client commands and `capfs mcp`, so each flag
//! is spelled and documented once.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::parse::{duration, message_size, timeout};

/// Which file system the client subcommands use (before the subcommand name).
#[derive(Args)]
pub struct Target {
    #[command(flatten)]
    pub server: Server,
    /// A read-write sandbox root (repeatable); the client works on it directly, no server.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable).
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    #[command(flatten)]
    pub connection: Connection,
    /// The sandbox directory relative paths start from.
    #[arg(long = "cd", value_name = "DIR")]
    pub cd: Option<String>,
    /// Log each call and its time on stderr (-vv for more).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// A capfs server instead of local roots (the command that embeds it has `root` and
/// `read_only` flags, which these exclude).
#[derive(Args)]
pub struct Server {
    /// URL of a capfs server (ws://HOST:PORT or wss://HOST:PORT) [env: CAPFS_REMOTE].
    #[arg(long, value_name = "URL", conflicts_with_all = ["root", "read_only", "remote_command"])]
    pub remote: Option<String>,
    /// A command (run with `sh -c`) that speaks the protocol on its stdin and stdout, such as
    /// "ssh host capfs serve --listen stdio --root /srv/ws" [env: CAPFS_REMOTE_COMMAND].
    #[arg(long, value_name = "CMD", conflicts_with_all = ["root", "read_only"])]
    pub remote_command: Option<String>,
}

/// How the server is reached: the token, the certificates, the timeouts, the message limit.
#[derive(Args)]
pub struct Connection {
    /// A file holding the bearer token (else the CAPFS_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A PEM file of certificate authorities trusted for wss:// besides the platform's.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Give up connecting (and the remote command's handshake) after this long: 10s, 500ms, 2m.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub connect_timeout: Duration,
    /// Give up on a call the server does not answer within this long (streamed transfers are
    /// bounded by --stream-idle-timeout instead).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = timeout)]
    pub call_timeout: Duration,
    /// Give up on a streamed get, put or cat that makes no progress for this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = timeout)]
    pub stream_idle_timeout: Duration,
    /// Longest message (and WebSocket frame) accepted from the server: 64M, 1G.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = message_size)]
    pub max_message_bytes: usize,
}

/// Where the file system comes from, after the environment fallbacks.
pub enum Endpoint {
    Url(String),
    Command(String),
    Local,
}

impl Server {
    /// The flags when given (`local`: local roots were), else `CAPFS_REMOTE_COMMAND` or
    /// `CAPFS_REMOTE`: a flag always wins over the environment. `None` when nothing names a
    /// file system.
    pub fn endpoint(&self, local: bool) -> Result<Option<Endpoint>, String> {
        if let Some(url) = &self.remote {
            return Ok(Some(Endpoint::Url(url.clone())));
        }
        if let Some(command) = &self.remote_command {
            return Ok(Some(Endpoint::Command(command.clone())));
        }
        if local {
            return Ok(Some(Endpoint::Local));
        }
        let env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        match (env("CAPFS_REMOTE"), env("CAPFS_REMOTE_COMMAND")) {
            (Some(_), Some(_)) => Err(
                "both CAPFS_REMOTE and CAPFS_REMOTE_COMMAND are set; unset one or give a flag"
                    .into(),
            ),
            (Some(url), None) => Ok(Some(Endpoint::Url(url))),
            (None, Some(command)) => Ok(Some(Endpoint::Command(command))),
            (None, None) => Ok(None),
        }
    }
}
