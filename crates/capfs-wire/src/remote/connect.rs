//! Opening a connection: over TCP with the WebSocket upgrade, or over a command's stdin and
//! stdout; then the `initialize` handshake.

use std::io;
use std::process::Stdio;

use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::{IntoClientRequest, uri_mode};
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::stream::Mode;

use super::client::{Client, CommandGroup};
use super::common::timed_out;
use super::handle::RemoteFileSystem;
use super::options::RemoteOptions;
use crate::transport::shared::{DirectSocket, SharedSocket, StreamSocket};
use crate::transport::stdio::widen_socket;

/// The bounds on what the server sends: a frame or message longer than
/// `options.max_message_bytes` ends the connection when its header announces it, before
/// anything is allocated for it (a header that announces a terabyte is refused, not trusted).
fn client_ws_config(options: &RemoteOptions) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(options.max_message_bytes))
        .max_frame_size(Some(options.max_message_bytes))
}

/// The TLS connector of `wss://`: the platform's roots plus those in `ca_file`.
#[cfg(feature = "tls")]
fn tls_connector(ca_file: Option<&std::path::Path>) -> io::Result<tokio_tungstenite::Connector> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    // Certificates the platform store holds but rustls cannot parse are skipped, as browsers do.
    let native = rustls_native_certs::load_native_certs();
    let (_, _) = roots.add_parsable_certificates(native.certs);
    if let Some(file) = ca_file {
        let bad = |e: &dyn std::fmt::Display| crate::error::not_pem(file, e);
        let mut added = 0;
        for cert in CertificateDer::pem_file_iter(file).map_err(|e| match e {
            rustls::pki_types::pem::Error::Io(e) => crate::error::prefixed(file.display(), &e),
            other => bad(&other),
        })? {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad(&"no certificate in it"));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(crate::error::tls_setup)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(
        config,
    )))
}

/// Runs `connect` (the TCP or TLS connection and the WebSocket upgrade) within the connect
/// timeout, its failure as [`connect_error`] describes it.
async fn within<T>(
    url: &str,
    options: &RemoteOptions,
    connect: impl Future<Output = Result<T, WsError>>,
) -> io::Result<T> {
    tokio::time::timeout(options.connect_timeout, connect)
        .await
        .map_err(|_| timed_out("connecting", options.connect_timeout))?
        .map_err(|e| connect_error(url, e))
}

/// The TCP connection to the host and port `request` names, without Nagle's delay (requests
/// are small and waited on).
async fn connect_tcp(request: &Request) -> Result<tokio::net::TcpStream, WsError> {
    let uri = request.uri();
    let host = uri.host().ok_or(WsError::Url(UrlError::NoHostName))?;
    // An IPv6 address comes in brackets.
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = uri.port_u16().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((host, port)).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// Longest part of a refusing server's HTTP body kept in the error, in characters.
const MAX_BODY_CHARS: usize = 200;

/// Maps a failed WebSocket connect to an `io::Error` a person can act on.
fn connect_error(url: &str, err: WsError) -> io::Error {
    match err {
        WsError::Http(response) => {
            let status = response.status();
            // The server's own text: at most MAX_BODY_CHARS of it (a caller that prints it
            // escapes it for the terminal).
            let body = response
                .body()
                .as_ref()
                .map(|b| {
                    let text = String::from_utf8_lossy(b);
                    match text.char_indices().nth(MAX_BODY_CHARS) {
                        Some((end, _)) => {
                            format!("{}…[cut {} bytes]", &text[..end], text.len() - end)
                        }
                        None => text.into_owned(),
                    }
                })
                .unwrap_or_default();
            let kind = match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => io::ErrorKind::PermissionDenied,
                StatusCode::SERVICE_UNAVAILABLE => io::ErrorKind::ConnectionRefused,
                _ => io::ErrorKind::Other,
            };
            crate::error::refused_by_server(url, kind, status, &body)
        }
        WsError::Io(e) => crate::error::prefixed(url, &e),
        other => crate::error::connect_failed(url, other),
    }
}

impl RemoteFileSystem {
    /// Connects to `url` (`ws://HOST:PORT`, or `wss://HOST:PORT` through TLS with the
    /// platform's certificate authorities and those of `options.ca_file`) and completes the
    /// `initialize` handshake.
    ///
    /// # Errors
    ///
    /// `Unsupported` for `wss://` in a build without the `tls` feature; `InvalidData` for a
    /// `ca_file` that holds no certificate; the TLS failure (an unknown issuer, a name that does
    /// not match) as `Other`;
    /// `TimedOut` past `connect_timeout`; `PermissionDenied` when the server refuses the token or
    /// the request; `ConnectionRefused` when nothing listens or the server is full.
    pub async fn connect(url: &str, options: RemoteOptions) -> io::Result<Self> {
        let mut request = url
            .into_client_request()
            .map_err(|e| crate::error::invalid_url(url, e))?;
        if let Some(token) = &options.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| crate::error::token_not_a_header())?;
            request.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let mode = uri_mode(request.uri()).map_err(|e| connect_error(url, e))?;
        if matches!(mode, Mode::Tls) {
            return Self::connect_tls(url, request, options).await;
        }
        // Plain TCP: the writer writes streamed writes' data frames into the socket itself.
        let connect = async {
            let tcp = connect_tcp(&request).await?;
            let shared = SharedSocket::new(StreamSocket::Tcp(tcp));
            let socket = shared.direct();
            let config = Some(client_ws_config(&options));
            let (ws, _) =
                tokio_tungstenite::client_async_with_config(request, shared, config).await?;
            Ok((ws, socket))
        };
        let (ws, socket) = within(url, &options, connect).await?;
        Self::start(ws, Some(socket), &options, None).await
    }

    /// A `wss://` connection: TLS with the platform's roots and `options.ca_file`.
    #[cfg(feature = "tls")]
    async fn connect_tls(url: &str, request: Request, options: RemoteOptions) -> io::Result<Self> {
        let tls = tls_connector(options.ca_file.as_deref())?;
        let config = Some(client_ws_config(&options));
        let connect =
            tokio_tungstenite::connect_async_tls_with_config(request, config, true, Some(tls));
        let (ws, _) = within(url, &options, connect).await?;
        Self::start(ws, None, &options, None).await
    }

    #[cfg(not(feature = "tls"))]
    async fn connect_tls(_: &str, _: Request, _: RemoteOptions) -> io::Result<Self> {
        Err(crate::error::tls_not_built())
    }

    /// Runs `command` with `sh -c` and speaks the protocol over its stdin and stdout (both one
    /// end of a Unix socket pair), as `capfs serve --listen stdio` expects: WebSocket frames
    /// without the HTTP upgrade. The command's stderr is the caller's. `options.token` is not used: the command's own channel
    /// (ssh, `kubectl exec`) authenticates. The command runs in its own process group, which
    /// is killed when the file system is dropped; when it exits, every pending and later call fails with `BrokenPipe`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> std::io::Result<()> {
    /// use capfs_wire::{RemoteFileSystem, RemoteOptions};
    ///
    /// let command = "ssh executor capfs serve --listen stdio --root /srv/ws";
    /// let fs = RemoteFileSystem::connect_command(command, RemoteOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of spawning `sh`; `TimedOut` when the command does not complete `initialize`
    /// within `connect_timeout`; `BrokenPipe` when it exits before.
    pub async fn connect_command(command: &str, options: RemoteOptions) -> io::Result<Self> {
        // The command's stdin and stdout are both one end of a Unix socket pair, as `sftp -D`
        // gives its server: a socket's reader and writer copy side by side, where a pipe's take
        // turns under one lock.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let theirs_out = theirs.try_clone()?;
        widen_socket(&ours);
        widen_socket(&theirs);
        ours.set_nonblocking(true)?;
        let io = tokio::net::UnixStream::from_std(ours)?;
        let child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
            .stderr(Stdio::inherit())
            // A local `capfs serve` must not take these as its own client settings.
            .env_remove("CAPFS_REMOTE_COMMAND")
            .env_remove("CAPFS_REMOTE")
            // Its own process group, so that everything it starts (a `capfs serve` that was
            // not told `--listen stdio`, ssh's helpers) ends with it.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| crate::error::prefixed(format_args!("starting `sh -c {command}`"), &e))?;
        // The command's end is closed here (the `Command` is gone): only the command holds it,
        // and its exit ends the stream.
        let child = CommandGroup(child);
        // Data frames are written past tungstenite, as on TCP.
        let shared = SharedSocket::new(StreamSocket::Unix(io));
        let socket = shared.direct();
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            shared,
            Role::Client,
            Some(client_ws_config(&options)),
        )
        .await;
        Self::start(ws, Some(socket), &options, Some(child))
            .await
            .map_err(|e| crate::error::prefixed(format_args!("`{command}`"), &e))
    }

    /// Speaks the protocol over `io`, a byte stream whose other end is served by
    /// [`serve_byte_stream`](crate::server::serve_byte_stream) (or `capfs serve --listen
    /// stdio`): WebSocket frames without the HTTP upgrade, as [`connect_command`] sends them.
    /// Data frames, when the server offers them, travel as WebSocket binary messages. The
    /// connection ends when the file system (every clone of it, and its
    /// [`RemoteProcesses`](crate::RemoteProcesses)) is dropped, which closes `io`.
    ///
    /// [`connect_command`]: Self::connect_command
    ///
    /// # Errors
    ///
    /// `TimedOut` when the other end does not complete `initialize` within `connect_timeout`;
    /// `BrokenPipe` when `io` ends before.
    pub async fn connect_byte_stream<S>(io: S, options: RemoteOptions) -> io::Result<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            io,
            Role::Client,
            Some(client_ws_config(&options)),
        )
        .await;
        Self::start(ws, None, &options, None).await
    }

    /// Starts the connection's tasks on an open WebSocket and completes `initialize`.
    async fn start<S>(
        ws: tokio_tungstenite::WebSocketStream<S>,
        socket: Option<DirectSocket>,
        options: &RemoteOptions,
        command: Option<CommandGroup>,
    ) -> io::Result<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let client = Client::start(ws, socket, options, command).await?;
        Ok(Self {
            client: std::sync::Arc::new(client),
        })
    }
}
