//! Transparent TCP: tools that ignore the proxy variables (curl told so, Python's
//! `http.client`, Node's `fetch`) resolve names through capfs's responder inside their own
//! namespace and reach the allowed hosts through the same policy as the proxy; everything else
//! they try is refused, and a lookup of a name not listed goes nowhere.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use capfs::audit::AuditLog;
use capfs::process::egress::{EgressPolicy, Resolver};
use capfs::process::{Network, ProcessExit};

use super::PY;
use super::servers::{AsIfDns, Lines, Web};
use crate::processes::{Workspace, policy, run, shell};

/// Answers from a table as DNS would, and remembers every name it was asked.
#[derive(Debug)]
struct Recording {
    table: AsIfDns,
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Resolver for Recording {
    async fn lookup(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        self.asked.lock().unwrap().push(name.to_string());
        self.table.lookup(name, port).await
    }
}

/// A transparent policy from `directives`, writing to `lines`, resolving through `dns`; the
/// names the resolver is asked land in the returned list.
fn transparent(
    directives: &str,
    dns: &[(&str, &str)],
    lines: &Lines,
) -> (EgressPolicy, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let table = dns
        .iter()
        .map(|(name, addr)| (name.to_string(), addr.parse().unwrap()))
        .collect::<HashMap<_, _>>();
    let resolver = Recording {
        table: AsIfDns(table),
        asked: asked.clone(),
    };
    let policy = EgressPolicy::default()
        .with_directives(directives)
        .unwrap()
        .with_resolver(Arc::new(resolver))
        .with_audit(AuditLog::to_writer(lines.clone()))
        .with_transparent_tcp();
    (policy, asked)
}

/// What is left under the run directories of `parent`.
fn left_under(parent: &std::path::Path) -> Vec<String> {
    let mut left = Vec::new();
    for run in std::fs::read_dir(parent).unwrap() {
        for entry in std::fs::read_dir(run.unwrap().path()).unwrap() {
            left.push(entry.unwrap().file_name().to_string_lossy().into_owned());
        }
    }
    left
}

fn node() -> Option<&'static str> {
    ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_that_ignore_the_proxy_reach_an_allowed_name_and_nothing_else() {
    let web = Web::plain("127.0.0.41", 0, b"hello transparently\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!(
        "allow web.test:{port}\nresolve web.test:{port}:127.0.0.41\n\
         allow inside.test:{port}\nresolve other.test:{port}:127.0.0.41"
    );
    let (egress, asked) = transparent(&rules, &[("inside.test", "127.0.0.41")], &lines);
    let ws = Workspace::new();
    let temp = tempfile::tempdir().unwrap();
    let processes = ws.processes(
        policy(Network::None)
            .with_egress(egress)
            .with_temp_parent(temp.path()),
    );
    let node_fetch = match node() {
        Some(node) => format!(
            "OPENSSL_CONF=/dev/null {node} -e 'fetch(\"http://web.test:{port}/n\").then(r => r.text()).then(t => process.stdout.write(t), e => console.log(\"node failed\", e.cause))'"
        ),
        None => String::new(),
    };
    // Each tool with the proxy variables gone, so nothing goes through the proxies.
    let script = format!(
        "unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY
         curl -sS --noproxy '*' http://web.test:{port}/secret-path; echo rc=$?
         {PY} -c 'import http.client as h; c = h.HTTPConnection(\"web.test\", {port}); c.request(\"GET\", \"/p\"); print(c.getresponse().read().decode().strip())'
         {node_fetch}
         curl -sS --noproxy '*' http://other.test:{port}/; echo unlisted rc=$?
         {PY} -c 'import socket; socket.getaddrinfo(\"leak-me.unlisted.test\", 80)' 2>&1 | tail -1
         curl -sS --noproxy '*' http://inside.test:{port}/; echo rebound rc=$?
         curl -sS --noproxy '*' http://127.0.0.41:{port}/; echo literal rc=$?
         curl -sS --noproxy '*' http://198.18.3.3:{port}/; echo never given rc=$?
         curl -sS --noproxy '*' http://web.test:{}/; echo other port rc=$?
         {PY} -c 'import socket; socket.create_connection((\"198.18.0.1\", {}))' 2>&1 | tail -1
         cat /etc/resolv.conf; echo nameserver 127.0.0.9 >> /etc/resolv.conf || echo resolv.conf kept
         curl -sS --noproxy '*' -g 'http://[::1]:{port}/'; echo v6 rc=$?
         {PY} -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((\"198.18.0.1\", 53)); s.send(bytes(12)); s.recv(10)' 2>&1 | tail -1
         {PY} -c 'import socket; print(\"A\", socket.getaddrinfo(\"web.test\", {port}, socket.AF_INET)[0][4][0]); print(\"AAAA\", socket.getaddrinfo(\"web.test\", {port}, socket.AF_INET6))' 2>&1 | tail -2",
        port + 1,
        port + 1
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(done.exit, ProcessExit::code(0), "{text}");
    // The process's resolv.conf names its responder, and is not its to change; it is gone
    // with the process.
    assert!(text.contains("\nnameserver 127.0.0.1\n"), "{text}");
    assert!(text.contains("resolv.conf kept"), "{text}");
    assert_eq!(left_under(temp.path()), Vec::<String>::new());
    let reached = 2 + usize::from(node().is_some());
    assert_eq!(
        text.matches("hello transparently").count(),
        reached,
        "{text}"
    );
    assert!(text.contains("hello transparently\nrc=0"), "{text}");
    // Names not listed get no address (curl's 6: could not resolve), and the lookup of one
    // was not passed on: the resolver outside was asked for the one allowed name DNS
    // answers, on its connection, and nothing else.
    assert!(text.contains("unlisted rc=6"), "{text}");
    assert!(text.contains("Name or service not known"), "{text}");
    assert_eq!(*asked.lock().unwrap(), ["inside.test"], "{text}");
    assert!(!lines.text().contains("leak-me"), "{}", lines.text());
    // Refused by the same policy as the proxy's: the connection ends with no answer (curl's
    // 52, or 56 when its request was sent before the end and the end is a reset).
    for refused in ["rebound", "literal", "never given"] {
        assert!(
            text.contains(&format!("{refused} rc=52"))
                || text.contains(&format!("{refused} rc=56")),
            "{refused}: {text}"
        );
    }
    // A port no rule names, and IPv6: nothing listens, nothing is routed; Landlock refuses
    // a connection to another port before anything could listen there.
    assert!(text.contains("other port rc=7"), "{text}");
    assert!(text.contains("PermissionError"), "{text}");
    assert!(text.contains("v6 rc=7"), "{text}");
    assert!(text.contains("A 198.18.0.1"), "{text}");
    // UDP reaches the responder on 127.0.0.1 only: the same port elsewhere answers nothing.
    assert!(text.contains("ConnectionRefusedError"), "{text}");
    // An allowed name has no IPv6 address (no error either: the C library's "no address").
    assert!(
        text.contains("No address associated with hostname"),
        "{text}"
    );
    assert_eq!(web.contacts(), reached, "{text}");
    let audit = lines.egress();
    let seen: Vec<(&str, &str, &str)> = audit
        .iter()
        .map(|l| {
            (
                l["via"].as_str().unwrap(),
                l["host"].as_str().unwrap(),
                l["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected = vec![("transparent", "web.test", "ok"); reached];
    expected.extend([
        ("transparent", "inside.test", "refused"),
        ("transparent", "127.0.0.41", "refused"),
        ("transparent", "198.18.3.3", "refused"),
    ]);
    assert_eq!(seen, expected, "{audit:?}");
    assert_eq!(audit[0]["address"], format!("127.0.0.41:{port}"));
    assert_eq!(audit[0]["port"], port);
    assert!(
        audit[reached]["reason"]
            .as_str()
            .unwrap()
            .contains("resolves only to refused addresses"),
        "{audit:?}"
    );
    assert_eq!(audit[reached + 1]["reason"], "not allowed");
    assert!(!lines.text().contains("secret-path"), "{}", lines.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transparent_connection_to_443_carries_tls_for_the_name_it_resolved_only() {
    let ws = Workspace::new();
    let ca = ws.root.join("ca.pem");
    let _tls = Web::tls("127.0.0.42", 443, "tls.test", &ca).await;
    let lines = Lines::default();
    let rules = "allow tls.test\nresolve tls.test:443:127.0.0.42\n\
                 allow front.test\nresolve front.test:443:127.0.0.42";
    let (egress, _) = transparent(rules, &[], &lines);
    let processes = ws.processes(policy(Network::None).with_egress(egress));
    let ca = ca.display();
    // Fronting: the connection goes to the address tls.test was given, the ClientHello names
    // front.test (allowed too, but not the name that address stands for).
    let script = format!(
        "curl -sS --noproxy '*' --cacert {ca} https://tls.test/; echo rc=$?
         curl -sS --noproxy '*' --cacert {ca} --connect-to front.test:443:tls.test:443 https://front.test/; echo fronted rc=$?"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert!(text.contains("hello over tls\nrc=0"), "{text}");
    assert!(text.contains("fronted rc=35"), "{text}");
    let audit = lines.egress();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(
        (&audit[0]["via"], &audit[0]["host"], &audit[0]["outcome"]),
        (&"transparent".into(), &"tls.test".into(), &"ok".into())
    );
    assert_eq!(
        (&audit[1]["host"], &audit[1]["outcome"]),
        (&"tls.test".into(), &"refused".into())
    );
    assert!(
        audit[1]["reason"]
            .as_str()
            .unwrap()
            .contains("\"front.test\", not the host asked for"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transparent_tcp_a_tool_that_ignores_the_proxy_resolves_nothing() {
    let web = Web::plain("127.0.0.43", 0, b"not this way\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.43");
    let egress = super::egress(&rules, &[], &lines);
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_egress(egress));
    let script =
        format!("curl -sS --noproxy '*' http://web.test:{port}/; echo rc=$?; cat /etc/resolv.conf");
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert!(text.contains("rc=6"), "{text}");
    assert!(!text.contains("capfs"), "the host's resolv.conf: {text}");
    assert_eq!(web.contacts(), 0);
    assert!(lines.egress().is_empty());
}

const INNER: &str = "CAPFS_TRANSPARENT_TEST_UNPRIVILEGED";

#[test]
fn an_unprivileged_starter_serves_transparent_tcp_from_a_user_namespace() {
    crate::processes::rerun_unprivileged(
        "processes::egress::transparent::unprivileged_inner",
        INNER,
    );
}

/// As a user who is not root: the child's route, listeners on ports below 1024 and its
/// resolv.conf mount are made with the privileges of its own user namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprivileged_inner() {
    if std::env::var_os(INNER).is_none() {
        return;
    }
    use capfs::{Access, Sandbox};
    let web = Web::plain("127.0.0.45", 0, b"unprivileged and transparent\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.45");
    let (egress, _) = transparent(&rules, &[], &lines);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sandbox = Sandbox::new().with_root(&root, Access::ReadWrite).unwrap();
    let processes =
        capfs::process::LocalProcesses::new(sandbox, policy(Network::None).with_egress(egress))
            .unwrap();
    let script = format!(
        "curl -sS --noproxy '*' http://web.test:{port}/; curl -sS --noproxy '*' http://other.test:{port}/; echo rc=$?"
    );
    let done = run(&processes, shell("sh", &script, &root)).await.unwrap();
    let text = done.text();
    assert!(text.starts_with("unprivileged and transparent\n"), "{text}");
    assert!(text.contains("rc=6"), "{text}");
    assert_eq!(web.contacts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transparent_connections_count_against_the_processs_bounds() {
    let web = Web::plain("127.0.0.46", 0, b"one at a time\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.46");
    let (egress, _) = transparent(&rules, &[], &lines);
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_egress(egress.with_max_connections(1)));
    // The first connection holds the one place; the second, made while it is open, is
    // refused; the first then gets its answer.
    let script = format!(
        "{PY} -c '
import socket
get = b\"GET / HTTP/1.0\\r\\nHost: web.test\\r\\n\\r\\n\"
first = socket.create_connection((\"web.test\", {port}))
second = socket.create_connection((\"web.test\", {port}))
try:
    second.sendall(get)
    print(\"second:\", second.recv(100))
except ConnectionResetError:
    print(\"second: reset\")
first.sendall(get)
print(\"first:\", first.recv(100).split(b\"\\r\\n\")[0].decode())'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert!(
        text.contains("second: b''") || text.contains("second: reset"),
        "{text}"
    );
    assert!(text.contains("first: HTTP/1.1 200 OK"), "{text}");
    assert_eq!(web.contacts(), 1, "{text}");
    let audit = lines.egress();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0]["via"], "transparent");
    assert_eq!(audit[0]["reason"], "too many connections at once");
    assert_eq!(audit[1]["outcome"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_ports_than_a_child_can_hand_over_are_refused_before_any_start() {
    let lines = Lines::default();
    // 80 and 443, and 31 more: 33 listeners, one past the bound.
    let rules: String = (0..31)
        .map(|i| format!("allow web.test:{}\n", 9000 + i))
        .collect();
    let (egress, _) = transparent(&rules, &[], &lines);
    let ws = Workspace::new();
    let sandbox = capfs::Sandbox::new()
        .with_root(&ws.root, capfs::Access::ReadWrite)
        .unwrap();
    let too_many = policy(Network::None)
        .with_egress(egress)
        .with_run_as(65534, 65534);
    let refused =
        capfs::LocalProcesses::new(sandbox, too_many).expect_err("33 transparent ports refused");
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
    assert!(refused.to_string().contains("at most 32"), "{refused}");
    assert!(refused.to_string().contains("name 33"), "{refused}");
    // One port fewer is held.
    let rules: String = (0..30)
        .map(|i| format!("allow web.test:{}\n", 9000 + i))
        .collect();
    let (egress, _) = transparent(&rules, &[], &lines);
    let processes = ws.processes(policy(Network::None).with_egress(egress));
    let done = run(&processes, shell("sh", "echo started", &ws.root))
        .await
        .unwrap();
    assert_eq!(done.text(), "started\n");
}
