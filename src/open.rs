//! The one way every command opens its file system: local roots confined here, a capfs server
//! at a URL, or one reached through a command, each with every flag of [`Server`] and
//! [`Connection`].

use std::path::{Path, PathBuf};

use capfs::{Access, Sandbox};
use capfs_wire::{Environment, RemoteFileSystem, RemoteOptions};

use crate::args::{Connection, Endpoint, Server, Target};
use crate::fail::Failure;

/// What the flags name, resolved once (the environment fallbacks applied, the token read), so
/// that a command can connect again with the same settings.
pub struct Opener {
    endpoint: Endpoint,
    options: RemoteOptions,
    roots: Vec<(PathBuf, Access)>,
}

impl Opener {
    /// The file system `server` and `roots` name (`roots` the local ones given, read-write
    /// first), reached as `connection` says; `nothing` is the usage message for when no file
    /// system is named at all.
    ///
    /// # Errors
    ///
    /// Usage failures (both environment variables set, nothing named), an unreadable or empty
    /// token.
    pub fn new(
        server: &Server,
        connection: &Connection,
        roots: Vec<(PathBuf, Access)>,
        nothing: &str,
    ) -> Result<Self, Failure> {
        let endpoint = server
            .endpoint(!roots.is_empty())
            .map_err(Failure::usage)?
            .ok_or_else(|| Failure::usage(nothing))?;
        let options = RemoteOptions::default()
            .with_connect_timeout(connection.connect_timeout)
            .with_call_timeout(connection.call_timeout)
            .with_stream_idle_timeout(connection.stream_idle_timeout)
            .with_max_message_bytes(connection.max_message_bytes);
        // A command's server is reached through its own pipes: no token and no certificates.
        let options = match endpoint {
            Endpoint::Url(_) => options
                .with_token(read_token(connection.token_file.as_deref())?)
                .with_ca_file(connection.ca_file.clone()),
            Endpoint::Command(_) | Endpoint::Local => options,
        };
        // Directories given beside a server name paths on the server, not roots here.
        let roots = if matches!(endpoint, Endpoint::Local) {
            roots
        } else {
            Vec::new()
        };
        Ok(Self {
            endpoint,
            options,
            roots,
        })
    }

    /// What the client commands' flags (before the subcommand) name.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn for_target(target: &Target) -> Result<Self, Failure> {
        Self::new(
            &target.server,
            &target.connection,
            flag_roots(&target.root, &target.read_only),
            "no file system: give --remote URL (or CAPFS_REMOTE), --remote-command CMD or --root DIR",
        )
    }

    /// Whether the file system is local roots, confined in this process (no server).
    pub fn is_local(&self) -> bool {
        matches!(self.endpoint, Endpoint::Local)
    }

    /// The local roots given, read-write ones first.
    pub fn local_roots(&self) -> &[(PathBuf, Access)] {
        &self.roots
    }

    /// The sandbox of the local roots.
    ///
    /// # Errors
    ///
    /// A root that cannot be opened.
    pub fn sandbox(&self) -> Result<Sandbox, Failure> {
        sandbox(&self.roots)
    }

    /// The file system, and the processes a server runs when it serves them.
    ///
    /// # Errors
    ///
    /// A root that cannot be opened, a server that cannot be reached.
    pub async fn open(&self) -> Result<Environment, Failure> {
        if self.is_local() {
            return Ok(Environment::local(self.sandbox()?));
        }
        Ok(Environment::from(self.connect().await?))
    }

    /// A new connection to the server.
    ///
    /// # Errors
    ///
    /// A server that cannot be reached; a usage failure for local roots, which have none.
    pub async fn connect(&self) -> Result<RemoteFileSystem, Failure> {
        match &self.endpoint {
            Endpoint::Command(command) => {
                RemoteFileSystem::connect_command(command, self.options.clone())
                    .await
                    .map_err(|e| Failure::connection("cannot connect through --remote-command", &e))
            }
            Endpoint::Url(url) => RemoteFileSystem::connect(url, self.options.clone())
                .await
                .map_err(|e| Failure::connection(&format!("cannot connect to {url}"), &e)),
            Endpoint::Local => Err(Failure::usage("local roots have no server to connect to")),
        }
    }
}

/// The roots of `--root` (read-write) and `--read-only` flags, in that order.
pub fn flag_roots(root: &[PathBuf], read_only: &[PathBuf]) -> Vec<(PathBuf, Access)> {
    root.iter()
        .map(|d| (d.clone(), Access::ReadWrite))
        .chain(read_only.iter().map(|d| (d.clone(), Access::ReadOnly)))
        .collect()
}

/// A sandbox of `roots`, each opened here with its access.
///
/// # Errors
///
/// A root that cannot be opened, named in the message.
pub fn sandbox(roots: &[(PathBuf, Access)]) -> Result<Sandbox, Failure> {
    let mut sandbox = Sandbox::new();
    for (dir, access) in roots {
        sandbox = sandbox
            .with_root(dir, *access)
            .map_err(|e| Failure::at("cannot open root", &dir.to_string_lossy(), &e))?;
    }
    Ok(sandbox)
}

/// The bearer token: the contents of `file` when given, else `CAPFS_TOKEN`; trimmed, and
/// refused when empty.
///
/// # Errors
///
/// An unreadable file, an empty token.
pub fn read_token(file: Option<&Path>) -> Result<Option<String>, Failure> {
    let token = match file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| Failure::at("cannot read token file", &file.to_string_lossy(), &e))?,
        ),
        None => std::env::var("CAPFS_TOKEN").ok(),
    };
    match token.map(|t| t.trim().to_string()) {
        Some(t) if t.is_empty() => Err(Failure::usage("the token is empty")),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn mcp_takes_the_server_flags_of_the_client() {
        let cli = parse(&[
            "capfs",
            "mcp",
            "--remote",
            "wss://h:1",
            "--ca-file",
            "/ca.pem",
            "--connect-timeout",
            "3s",
            "--call-timeout",
            "7s",
            "--stream-idle-timeout",
            "9s",
            "--max-message-bytes",
            "8M",
            "/srv/ws",
        ]);
        let Command::Mcp(args) = cli.command else {
            panic!("not mcp");
        };
        assert_eq!(args.server.remote.as_deref(), Some("wss://h:1"));
        assert_eq!(args.connection.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(args.connection.connect_timeout, Duration::from_secs(3));
        assert_eq!(args.connection.call_timeout, Duration::from_secs(7));
        assert_eq!(args.connection.stream_idle_timeout, Duration::from_secs(9));
        assert_eq!(args.connection.max_message_bytes, 8 << 20);
        assert_eq!(args.dirs, [PathBuf::from("/srv/ws")]);
        // A server and local roots exclude each other for mcp as for the client.
        for conflicting in [
            &["capfs", "mcp", "--remote", "ws://h:1", "--root", "/a"][..],
            &["capfs", "mcp", "--remote-command", "c", "--read-only", "/a"],
            &["capfs", "--remote", "ws://h:1", "--root", "/a", "roots"],
        ] {
            assert!(Cli::try_parse_from(conflicting).is_err(), "{conflicting:?}");
        }
    }

    #[test]
    fn the_token_is_read_for_a_url_only() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "  \n").unwrap();
        let token = empty.to_str().unwrap();
        let cli = parse(&[
            "capfs",
            "--remote",
            "ws://h:1",
            "--token-file",
            token,
            "roots",
        ]);
        let refused = Opener::for_target(&cli.target).err().unwrap();
        assert_eq!(refused.message, "the token is empty");
        assert_eq!(refused.status, crate::fail::EXIT_USAGE);
        // A command's server is reached through its pipes: the file is never read.
        let cli = parse(&[
            "capfs",
            "--remote-command",
            "c",
            "--token-file",
            token,
            "roots",
        ]);
        let opener = Opener::for_target(&cli.target).unwrap();
        assert!(!opener.is_local());
        assert!(opener.local_roots().is_empty());
    }

    #[test]
    fn local_roots_are_kept_only_without_a_server() {
        let cli = parse(&["capfs", "--root", "/a", "--read-only", "/b", "roots"]);
        let opener = Opener::for_target(&cli.target).unwrap();
        assert!(opener.is_local());
        assert_eq!(
            opener.local_roots(),
            [
                (PathBuf::from("/a"), Access::ReadWrite),
                (PathBuf::from("/b"), Access::ReadOnly)
            ]
        );
        // mcp's directories beside a server are the server's paths, not roots here.
        let Command::Mcp(args) = parse(&["capfs", "mcp", "--remote", "ws://h:1", "/srv"]).command
        else {
            panic!("not mcp");
        };
        let dirs = flag_roots(&args.dirs, &[]);
        let opener = Opener::new(&args.server, &args.connection, dirs, "none").unwrap();
        assert!(!opener.is_local());
        assert!(opener.local_roots().is_empty());
    }
}
