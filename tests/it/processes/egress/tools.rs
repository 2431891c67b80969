//! Egress as tools meet it: pip from a local index, git over HTTP and over HTTPS, no resolver and no other
//! interface inside, the bounds on connections and bytes, and a policy that allows nothing
//! adding nothing.

use capfs::process::egress::EgressPolicy;
use capfs::process::{Network, ProcessExit};

use super::servers::{Lines, Web};
use super::{PY, egress};
use crate::processes::{Workspace, policy, run, shell};

/// Runs `command` on the host (test set-up), failing on a non-zero status.
fn host(command: &str, cwd: &std::path::Path) {
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_downloads_a_wheel_from_a_local_index_and_git_clones_over_http() {
    let site = tempfile::tempdir().unwrap();
    // A wheel made on the spot, in a PEP 503 simple index; a bare repository for git's
    // HTTP protocol as a static server serves it.
    let wheel = "tinypkg-1.0-py3-none-any.whl";
    host(
        &format!(
            "mkdir -p simple/tinypkg && {PY} -c '
import zipfile
with zipfile.ZipFile(\"simple/tinypkg/{wheel}\", \"w\") as z:
    z.writestr(\"tinypkg/__init__.py\", \"X = 1\\n\")
    z.writestr(\"tinypkg-1.0.dist-info/METADATA\", \"Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 1.0\\n\")
    z.writestr(\"tinypkg-1.0.dist-info/WHEEL\", \"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n\")
    z.writestr(\"tinypkg-1.0.dist-info/RECORD\", \"\")
' && echo '<a href=\"tinypkg/\">tinypkg</a>' > simple/index.html \
  && echo '<a href=\"{wheel}\">{wheel}</a>' > simple/tinypkg/index.html \
  && git init -q src && git -C src -c user.name=t -c user.email=t@t commit -q --allow-empty -m from-the-index \
  && git clone -q --bare src repo.git && git -C repo.git update-server-info"
        ),
        site.path(),
    );
    let web = Web::files("127.0.0.24", site.path()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!(
        "allow pypi.test:{port}\nresolve pypi.test:{port}:127.0.0.24\n\
         allow git.test:{port}\nresolve git.test:{port}:127.0.0.24"
    );
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_egress(egress(&rules, &[], &lines)));
    let script = format!(
        "export HOME=$PWD
         {PY} -m pip download -q --no-cache-dir --disable-pip-version-check --no-deps \
           --trusted-host pypi.test --index-url http://pypi.test:{port}/simple/ -d dl tinypkg && ls dl
         git clone -q http://git.test:{port}/repo.git clone && git -C clone log --format=%s"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(done.exit, ProcessExit::code(0), "{text}");
    assert!(text.contains(wheel), "{text}");
    assert!(text.contains("from-the-index"), "{text}");
    let audit = lines.egress();
    assert!(audit.iter().all(|l| l["outcome"] == "ok"), "{audit:?}");
    assert!(audit.iter().any(|l| l["host"] == "git.test"), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_clones_over_https_through_a_tunnel_to_its_name_and_no_other() {
    let site = tempfile::tempdir().unwrap();
    host(
        "git init -q src && git -C src -c user.name=t -c user.email=t@t commit -q --allow-empty \
           -m over-tls && git clone -q --bare src repo.git && git -C repo.git update-server-info",
        site.path(),
    );
    let ws = Workspace::new();
    let ca = ws.root.join("ca.pem");
    let web = Web::tls_files("127.0.0.27", 443, "git.test", &ca, site.path()).await;
    let lines = Lines::default();
    // other.test reaches the same server, but no rule allows it.
    let rules =
        "allow git.test\nresolve git.test:443:127.0.0.27\nresolve other.test:443:127.0.0.27";
    let processes = ws.processes(policy(Network::None).with_egress(egress(rules, &[], &lines)));
    let script = format!(
        "export HOME=$PWD GIT_SSL_CAINFO={ca}
         git clone -q https://git.test/repo.git clone && git -C clone log --format=%s
         git clone -q https://other.test/repo.git other; echo other rc=$?",
        ca = ca.display()
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert!(text.starts_with("over-tls\n"), "{text}");
    assert!(text.contains("other rc=128\n"), "{text}");
    assert!(
        text.contains("CONNECT tunnel failed, response 403"),
        "{text}"
    );
    assert!(!ws.root.join("other").exists(), "{text}");
    let audit = lines.egress();
    let tunnels: Vec<_> = audit
        .iter()
        .map(|l| {
            (
                l["host"].as_str().unwrap(),
                l["port"].as_u64().unwrap(),
                l["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(tunnels.contains(&("git.test", 443, "ok")), "{audit:?}");
    assert!(
        tunnels.contains(&("other.test", 443, "refused")),
        "{audit:?}"
    );
    assert!(
        tunnels
            .iter()
            .all(|t| *t == ("git.test", 443, "ok") || *t == ("other.test", 443, "refused")),
        "{audit:?}"
    );
    // Only the allowed name's connections reached the server.
    let allowed = tunnels.iter().filter(|t| t.0 == "git.test").count();
    assert_eq!(web.contacts(), allowed, "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_there_is_no_resolver_and_no_interface_but_loopback() {
    let lines = Lines::default();
    let ws = Workspace::new();
    let rules = "allow web.test\nresolve web.test:*:127.0.0.25";
    let processes = ws.processes(policy(Network::None).with_egress(egress(rules, &[], &lines)));
    // A UDP query to a resolver on the loopback meets no one (the port is unreachable at
    // once); the C library cannot resolve the allowed name itself: only the proxy can.
    let script = format!(
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
         {PY} -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((\"127.0.0.53\", 53))
s.send(b\"query\")
try:
    s.recv(512)
except ConnectionRefusedError:
    print(\"udp 53: refused\")
try:
    socket.getaddrinfo(\"web.test\", 80)
except socket.gaierror:
    print(\"getaddrinfo: failed\")'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    assert_eq!(done.text(), "lo\nudp 53: refused\ngetaddrinfo: failed\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_at_once_and_bytes_in_all_are_bounded() {
    let web = Web::plain("127.0.0.26", 0, vec![b'x'; 64 * 1024]).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.26");
    let ws = Workspace::new();
    let bounded = egress(&rules, &[], &lines).with_max_connections(1);
    let processes = ws.processes(policy(Network::None).with_egress(bounded));
    let script = format!(
        "{PY} -c '
import socket
first = socket.create_connection((\"127.0.0.1\", 3128))
first.sendall(b\"CONNECT web.test:{port} HTTP/1.1\\r\\n\\r\\n\")
print(first.recv(100).split(b\"\\r\\n\")[0].decode())
second = socket.create_connection((\"127.0.0.1\", 3128))
print(\"second:\", second.recv(100))'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(text, "HTTP/1.1 200 Connection established\nsecond: b''\n");
    let reasons: Vec<_> = lines.egress().iter().map(|l| l["reason"].clone()).collect();
    assert!(
        reasons.contains(&"too many connections at once".into()),
        "{reasons:?}"
    );

    let lines = Lines::default();
    let bounded = egress(&rules, &[], &lines).with_max_bytes(8 * 1024);
    let processes = ws.processes(policy(Network::None).with_egress(bounded));
    let script = format!(
        "curl -sS http://web.test:{port}/ | wc -c; curl -sS http://web.test:{port}/; echo rc=$?"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    let got: usize = text.lines().next().unwrap().trim().parse().unwrap();
    assert!(got < 8 * 1024, "{text}");
    let reasons: Vec<_> = lines.egress().iter().map(|l| l["reason"].clone()).collect();
    assert_eq!(
        reasons,
        [
            "the process's byte budget is spent",
            "the process's byte budget is spent"
        ],
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_allows_nothing_adds_nothing() {
    let nothing = EgressPolicy::default().deny("web.test").unwrap();
    let with = policy(Network::None).with_egress(nothing);
    assert!(with.egress().is_none());
    let ws = Workspace::new();
    let processes = ws.processes(with);
    let script = format!(
        "env | grep -ci proxy; cat /proc/net/dev | grep -c 'lo:'; {PY} -c '
import socket
try:
    socket.create_connection((\"127.0.0.1\", 3128))
except OSError:
    print(\"refused\")'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    // No variable, `lo` down (so unreachable): the namespace as `None` always made it.
    assert_eq!(done.text(), "0\n1\nrefused\n");
}
