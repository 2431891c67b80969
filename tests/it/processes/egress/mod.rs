//! Egress by name through `LocalProcesses`: curl, Python and a tool that ignores the proxy
//! variables against web servers on 127.0.0.x, names mapped to them by the policy's pins or
//! by a resolver "as if DNS" (no test asks real DNS); each check of the proxy shown by what
//! it refuses, and the audit lines it writes.

pub(crate) mod servers;
mod tools;
mod transparent;

use std::collections::HashMap;
use std::sync::Arc;

use capfs::audit::AuditLog;
use capfs::process::egress::EgressPolicy;
use capfs::process::{Network, ProcessExit};

use super::{Workspace, policy, run, shell};
use servers::{AsIfDns, Lines, Web};

/// A policy from `directives`, writing to `lines`, resolving through `dns`.
pub(crate) fn egress(directives: &str, dns: &[(&str, &str)], lines: &Lines) -> EgressPolicy {
    let table = dns
        .iter()
        .map(|(name, addr)| (name.to_string(), addr.parse().unwrap()))
        .collect::<HashMap<_, _>>();
    EgressPolicy::default()
        .with_directives(directives)
        .unwrap()
        .with_resolver(Arc::new(AsIfDns(table)))
        .with_audit(AuditLog::to_writer(lines.clone()))
}

/// A plain web server on `ip` answering `body`, for the binary's tests.
pub(crate) async fn web(ip: &str, body: &[u8]) -> Web {
    Web::plain(ip, 0, body.to_vec()).await
}

const PY: &str = "/usr/bin/python3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_and_python_reach_an_allowed_name_and_nothing_else() {
    let web = Web::plain("127.0.0.21", 0, b"hello from web\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.21");
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_egress(egress(&rules, &[], &lines)));
    let script = format!(
        "curl -sS http://web.test:{port}/secret-path-1; echo rc=$?
         curl -sS -x socks5h://127.0.0.1:1080 http://web.test:{port}/secret-path-2; echo rc=$?
         {PY} -c 'import urllib.request as u; print(u.urlopen(\"http://web.test:{port}/p\").read().decode().strip())'
         curl -sS http://127.0.0.21:{port}/; echo rc=$?
         curl -sS http://other.test:{port}/; echo rc=$?
         curl -sS http://web.test:{}/; echo rc=$?
         curl -sS --noproxy '*' http://127.0.0.21:{port}/; echo direct rc=$?
         {PY} -c 'import socket; socket.create_connection((\"127.0.0.21\", {port}))' 2>&1 | tail -1",
        port + 1
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(done.exit, ProcessExit::code(0), "{text}");
    assert_eq!(text.matches("hello from web").count(), 3, "{text}");
    // An address literal, a name not listed, a port not listed: refused by the proxy.
    assert!(
        text.contains(&format!("127.0.0.21:{port}: not allowed")),
        "{text}"
    );
    assert!(
        text.contains(&format!("other.test:{port}: not allowed")),
        "{text}"
    );
    assert!(
        text.contains(&format!("web.test:{}: not allowed", port + 1)),
        "{text}"
    );
    // Around the proxy: nothing but the process's own loopback, where Landlock refuses.
    assert!(text.contains("direct rc=7"), "{text}");
    assert!(text.contains("PermissionError"), "{text}");
    assert_eq!(web.contacts(), 3, "{text}");
    let audit = lines.egress();
    let outcomes: Vec<_> = audit
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["ok", "ok", "ok", "refused", "refused", "refused"],
        "{audit:?}"
    );
    assert_eq!(audit[0]["via"], "http");
    assert_eq!(audit[1]["via"], "socks5");
    assert_eq!(audit[0]["address"], format!("127.0.0.21:{port}"));
    assert!(audit[0]["bytesIn"].as_u64().unwrap() > 15, "{audit:?}");
    assert!(audit[0]["bytesOut"].as_u64().unwrap() > 0, "{audit:?}");
    // No request contents: the path went to the server, not to the log.
    assert!(!lines.text().contains("secret-path"), "{}", lines.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_dns_answers_with_a_loopback_address_is_refused_unless_its_range_is_listed() {
    let web = Web::plain("127.0.0.22", 0, b"inside\n".to_vec()).await;
    let port = web.addr.port();
    let dns = [
        ("inside.test", "127.0.0.22"),
        ("meta.test", "169.254.169.254"),
    ];
    let script = format!(
        "curl -sS http://inside.test:{port}/; echo rc=$?; curl -sS http://meta.test/; echo rc=$?"
    );
    let lines = Lines::default();
    let ws = Workspace::new();
    let rules = format!("allow inside.test:{port}\nallow meta.test");
    let processes = ws.processes(policy(Network::None).with_egress(egress(&rules, &dns, &lines)));
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(
        text.matches("resolves only to refused addresses").count(),
        2,
        "{text}"
    );
    assert_eq!(web.contacts(), 0);
    // Listed, the range is the operator's word (the metadata address stays refused).
    let rules = format!("{rules}\nallow 127.0.0.0/8:{port}");
    let processes = ws.processes(policy(Network::None).with_egress(egress(&rules, &dns, &lines)));
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert!(text.contains("inside\nrc=0"), "{text}");
    assert_eq!(
        text.matches("resolves only to refused addresses").count(),
        1,
        "{text}"
    );
    assert_eq!(web.contacts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_to_443_carries_tls_for_the_host_it_named_only() {
    let ws = Workspace::new();
    let ca = ws.root.join("ca.pem");
    let _tls = Web::tls("127.0.0.23", 443, "tls.test", &ca).await;
    let lines = Lines::default();
    let rules =
        "allow tls.test\nresolve tls.test:443:127.0.0.23\nresolve front.test:443:127.0.0.23";
    let processes = ws.processes(policy(Network::None).with_egress(egress(rules, &[], &lines)));
    let ca = ca.display();
    let script = format!(
        "curl -sS --cacert {ca} https://tls.test/; echo rc=$?
         curl -sS --cacert {ca} -x socks5h://127.0.0.1:1080 https://tls.test/; echo rc=$?
         curl -sS --cacert {ca} --connect-to front.test:443:tls.test:443 https://front.test/; echo fronted rc=$?
         {PY} -c '
import socket
s = socket.create_connection((\"127.0.0.1\", 3128))
s.sendall(b\"CONNECT tls.test:443 HTTP/1.1\\r\\n\\r\\n\")
print(s.recv(100).split(b\"\\r\\n\")[0].decode())
s.sendall(b\"GET / HTTP/1.1\\r\\nHost: tls.test\\r\\n\\r\\n\")
print(\"plain text answered:\", s.recv(100))'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    let text = done.text();
    assert_eq!(text.matches("hello over tls\nrc=0").count(), 2, "{text}");
    assert!(!text.contains("fronted rc=0"), "{text}");
    assert!(
        text.contains("HTTP/1.1 200 Connection established"),
        "{text}"
    );
    assert!(text.contains("plain text answered: b''"), "{text}");
    let reasons: Vec<String> = lines
        .egress()
        .iter()
        .filter(|l| l["outcome"] == "refused")
        .map(|l| l["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].contains("\"front.test\", not the host asked for"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("not a TLS ClientHello"), "{reasons:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_proxies_do_not_serve_are_refused_by_protocol() {
    let web = Web::plain("127.0.0.29", 0, b"raw\n".to_vec()).await;
    let port = web.addr.port();
    let lines = Lines::default();
    let rules = format!("allow web.test:{port}\nresolve web.test:{port}:127.0.0.29");
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None).with_egress(egress(&rules, &[], &lines)));
    // SOCKS: BIND and UDP ASSOCIATE are not served (7), an unlisted address is not allowed
    // (2), a listed name is (0). HTTP: a Host header naming another host, an https:// URL.
    let script = format!(
        "{PY} -c '
import socket, struct
def socks(command, atyp, address):
    s = socket.create_connection((\"127.0.0.1\", 1080))
    s.sendall(b\"\\x05\\x01\\x00\")
    assert s.recv(2) == b\"\\x05\\x00\"
    s.sendall(bytes([5, command, 0, atyp]) + address + struct.pack(\">H\", {port}))
    print(\"socks\", command, atyp, s.recv(10)[1])
socks(2, 3, b\"\\x08web.test\")
socks(3, 3, b\"\\x08web.test\")
socks(1, 1, socket.inet_aton(\"127.0.0.29\"))
socks(1, 3, b\"\\x08web.test\")
def http(request):
    s = socket.create_connection((\"127.0.0.1\", 3128))
    s.sendall(request)
    print(s.recv(200).split(b\"\\r\\n\")[0].decode())
http(b\"GET http://web.test:{port}/ HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n\")
http(b\"GET https://web.test:{port}/ HTTP/1.1\\r\\n\\r\\n\")
http(b\"GET http://web.test:{port}/ HTTP/1.1\\r\\nHost: web.test:{port}\\r\\n\\r\\n\")'"
    );
    let done = run(&processes, shell("sh", &script, &ws.root))
        .await
        .unwrap();
    assert_eq!(
        done.text(),
        "socks 2 3 7\nsocks 3 3 7\nsocks 1 1 2\nsocks 1 3 0\n\
         HTTP/1.1 400 Bad Request\nHTTP/1.1 400 Bad Request\nHTTP/1.1 200 OK\n"
    );
    assert_eq!(web.contacts(), 2);
    assert_eq!(lines.egress().len(), 7);
}
