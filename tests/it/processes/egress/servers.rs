//! What the egress tests reach: web servers on 127.0.0.x (plain and TLS) that count the
//! connections they get, and a resolver that answers from a table as DNS would, so that no
//! test asks real DNS.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use capfs::process::egress::Resolver;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers names from a table, "as if DNS": the proxy treats its answers as it treats DNS's.
#[derive(Debug)]
pub(crate) struct AsIfDns(pub HashMap<String, IpAddr>);

#[async_trait]
impl Resolver for AsIfDns {
    async fn lookup(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        let found = self.0.get(name).ok_or(io::ErrorKind::NotFound)?;
        Ok(vec![*found])
    }
}

/// A server answering every request with `200` and its body, then closing.
pub(crate) struct Web {
    pub addr: SocketAddr,
    contacts: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Web {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Web {
    /// Connections it accepted so far.
    pub(crate) fn contacts(&self) -> usize {
        self.contacts.load(Ordering::SeqCst)
    }

    /// Plain HTTP on `ip`:`port` (0: any free port), answering with `body`.
    pub(crate) async fn plain(ip: &str, port: u16, body: Vec<u8>) -> Self {
        Self::serve(ip, port, Content::Body(body), None).await
    }

    /// Plain HTTP on `ip`, any free port, serving the files under `dir` (`index.html` for a
    /// directory; 404 for anything else).
    pub(crate) async fn files(ip: &str, dir: &std::path::Path) -> Self {
        Self::serve(ip, 0, Content::Files(dir.to_owned()), None).await
    }

    /// HTTPS with a certificate for `name` from a new authority, whose certificate (PEM) is
    /// written to `ca_file`.
    pub(crate) async fn tls(ip: &str, port: u16, name: &str, ca_file: &std::path::Path) -> Self {
        let body = Content::Body(b"hello over tls\n".to_vec());
        Self::serve(ip, port, body, Some(acceptor(name, ca_file))).await
    }

    /// HTTPS as [`Web::tls`] makes it, serving the files under `dir` as [`Web::files`] does.
    pub(crate) async fn tls_files(
        ip: &str,
        port: u16,
        name: &str,
        ca_file: &std::path::Path,
        dir: &std::path::Path,
    ) -> Self {
        let files = Content::Files(dir.to_owned());
        Self::serve(ip, port, files, Some(acceptor(name, ca_file))).await
    }

    async fn serve(
        ip: &str,
        port: u16,
        body: Content,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Self {
        let listener = TcpListener::bind((ip, port)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let contacts = Arc::new(AtomicUsize::new(0));
        let counted = contacts.clone();
        let body = Arc::new(body);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let body = body.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => answer(tcp, &body).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                answer(stream, &body).await;
                            }
                        }
                    }
                });
            }
        });
        Self {
            addr,
            contacts,
            task,
        }
    }
}

/// A TLS acceptor with a certificate for `name` from a new authority, whose certificate (PEM)
/// is written to `ca_file`.
fn acceptor(name: &str, ca_file: &std::path::Path) -> tokio_rustls::TlsAcceptor {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // OpenSSL takes a leaf whose issuer is its own subject for self-signed.
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "capfs egress test authority");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec![name.to_string()]).unwrap();
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, name);
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    std::fs::write(ca_file, ca.pem()).unwrap();
    let provider = tokio_rustls::rustls::crypto::ring::default_provider();
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            tokio_rustls::rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
                .unwrap(),
        )
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// What a server answers with.
enum Content {
    Body(Vec<u8>),
    Files(std::path::PathBuf),
}

/// Reads a request head, answers with the content it names, closes.
async fn answer(mut stream: impl AsyncRead + AsyncWrite + Unpin, content: &Content) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let mut kind = "text/plain";
    let (status, body) = match content {
        Content::Body(body) => ("200 OK", body.clone()),
        Content::Files(dir) => {
            let text = String::from_utf8_lossy(&seen);
            let path = text.split(' ').nth(1).unwrap_or("/");
            let path = path.split('?').next().unwrap_or_default();
            let mut file = dir.join(path.trim_start_matches('/'));
            if file.is_dir() {
                file = file.join("index.html");
                kind = "text/html";
            }
            match std::fs::read(&file) {
                Ok(bytes) if !path.contains("..") => ("200 OK", bytes),
                _ => ("404 Not Found", b"not found\n".to_vec()),
            }
        }
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

/// An audit log in memory: its lines, parsed.
#[derive(Clone, Default)]
pub(crate) struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Lines {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The egress lines.
    pub(crate) fn egress(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["method"] == "egress")
            .collect()
    }
}
