//! The policy's decisions, with a resolver that answers from a table: no test here asks DNS.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;

use super::{EgressNarrowing, EgressPolicy, HostRule, Resolver};

/// Answers names from a table, as DNS would.
#[derive(Debug)]
struct Table(HashMap<&'static str, Vec<&'static str>>);

#[async_trait]
impl Resolver for Table {
    async fn lookup(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        let found = self.0.get(name).ok_or(io::ErrorKind::NotFound)?;
        Ok(found.iter().map(|a| a.parse().expect("addr")).collect())
    }
}

fn policy(rules: &str) -> EgressPolicy {
    let table = Table(HashMap::from([
        ("public.test", vec!["93.184.216.34"]),
        ("loopback.test", vec!["127.0.0.1"]),
        ("private.test", vec!["10.1.2.3"]),
        ("metadata.test", vec!["169.254.169.254"]),
        ("metadata6.test", vec!["fd00:ec2::254"]),
        ("mapped.test", vec!["::ffff:127.0.0.1"]),
        ("mixed.test", vec!["127.0.0.1", "93.184.216.34"]),
        ("a.pypi.test", vec!["93.184.216.35"]),
    ]));
    EgressPolicy::default()
        .with_directives(rules)
        .expect("rules")
        .with_resolver(Arc::new(table))
}

async fn decide(policy: &EgressPolicy, host: &str, port: u16) -> Result<Vec<String>, String> {
    let addrs = policy
        .decide(host, port, &EgressNarrowing::default())
        .await?;
    Ok(addrs.iter().map(ToString::to_string).collect())
}

#[tokio::test]
async fn a_listed_name_resolves_and_anything_else_is_refused() {
    let p = policy("allow public.test\nallow *.pypi.test:*");
    assert_eq!(
        decide(&p, "public.test", 443).await,
        Ok(vec!["93.184.216.34:443".into()])
    );
    assert_eq!(
        decide(&p, "a.pypi.test", 8443).await,
        Ok(vec!["93.184.216.35:8443".into()])
    );
    assert!(decide(&p, "public.test", 22).await.is_err());
    assert!(decide(&p, "private.test", 443).await.is_err());
    assert!(decide(&p, "pypi.test", 443).await.is_err());
}

#[tokio::test]
async fn address_literals_are_refused_unless_listed() {
    let p = policy("allow public.test");
    for host in [
        "93.184.216.34",
        "[::1]",
        "127.0.0.1",
        "2130706433",
        "0x7f.1",
        "127.1",
    ] {
        assert!(decide(&p, host, 443).await.is_err(), "{host}");
    }
    let p = policy("allow 93.184.216.0/24");
    assert_eq!(
        decide(&p, "93.184.216.34", 80).await,
        Ok(vec!["93.184.216.34:80".into()])
    );
}

#[tokio::test]
async fn names_resolving_into_special_ranges_are_refused_unless_the_range_is_listed() {
    let p = policy("allow *.test");
    for host in [
        "loopback.test",
        "private.test",
        "metadata.test",
        "metadata6.test",
        "mapped.test",
    ] {
        let refused = decide(&p, host, 443).await.expect_err(host);
        assert!(refused.contains("refused addresses"), "{host}: {refused}");
    }
    // Of a mixed answer only the public address is kept.
    assert_eq!(
        decide(&p, "mixed.test", 443).await,
        Ok(vec!["93.184.216.34:443".into()])
    );
    let p = policy("allow *.test\nallow 127.0.0.0/8\nallow 169.254.169.254/32:80");
    assert_eq!(
        decide(&p, "loopback.test", 443).await,
        Ok(vec!["127.0.0.1:443".into()])
    );
    assert_eq!(
        decide(&p, "metadata.test", 80).await,
        Ok(vec!["169.254.169.254:80".into()])
    );
    assert!(decide(&p, "metadata.test", 443).await.is_err());
}

#[tokio::test]
async fn pinned_names_are_the_operators_word_and_deny_wins() {
    let p = policy("allow *.test:*\nresolve loopback.test:9000:127.0.0.5\ndeny bad.test");
    assert_eq!(
        decide(&p, "loopback.test", 9000).await,
        Ok(vec!["127.0.0.5:9000".into()])
    );
    // Another port is not pinned: the DNS answer (loopback) is refused.
    assert!(decide(&p, "loopback.test", 9001).await.is_err());
    assert_eq!(decide(&p, "bad.test", 443).await, Err("denied".into()));
    let p = policy("allow *.test\ndeny 93.184.216.0/24:*");
    assert!(decide(&p, "public.test", 443).await.is_err());
}

#[tokio::test]
async fn a_narrowing_only_takes_away() {
    let p = policy("allow public.test\nallow a.pypi.test");
    let only_pypi = EgressNarrowing::new(
        Some(vec![HostRule::parse("*.pypi.test").expect("rule")]),
        Vec::new(),
    );
    assert!(p.decide("a.pypi.test", 443, &only_pypi).await.is_ok());
    assert!(p.decide("public.test", 443, &only_pypi).await.is_err());
    let wider = EgressNarrowing::new(
        Some(vec![HostRule::parse("private.test").expect("rule")]),
        vec![HostRule::parse("a.pypi.test").expect("rule")],
    );
    assert!(p.decide("private.test", 443, &wider).await.is_err());
    assert!(p.decide("a.pypi.test", 443, &wider).await.is_err());
    // Without local addresses: the operator's pin and range are refused too, a public answer
    // is not.
    let p = policy(
        "allow public.test\nallow pinned.test\nresolve pinned.test:443:127.0.0.5\n\
         allow private.test\nallow 10.0.0.0/8\nallow 127.0.0.9",
    );
    let all = EgressNarrowing::new(None, Vec::new());
    for host in ["pinned.test", "private.test", "127.0.0.9"] {
        assert!(p.decide(host, 443, &all).await.is_ok(), "{host}");
    }
    let no_local = all.without_local();
    for host in ["pinned.test", "private.test", "127.0.0.9"] {
        let err = p.decide(host, 443, &no_local).await.expect_err(host);
        assert!(err.contains("allowLocalBinding is off"), "{host}: {err}");
    }
    assert!(p.decide("public.test", 443, &no_local).await.is_ok());
}

#[test]
fn a_policy_file_names_its_bad_line() {
    let err = EgressPolicy::default()
        .with_directives("# comment\n\nallow a.test\nallow *\n")
        .expect_err("refused");
    assert!(err.to_string().starts_with("line 4:"), "{err}");
    let err = EgressPolicy::default()
        .with_directives("permit a.test")
        .expect_err("refused");
    assert!(
        err.to_string().contains("not allow, deny or resolve"),
        "{err}"
    );
    assert!(EgressPolicy::default().resolve("a.test:443").is_err());
    assert!(EgressPolicy::default().resolve("a.test:443:nope").is_err());
    assert!(
        EgressPolicy::default()
            .resolve("a.test:*:[::1],127.0.0.2")
            .is_ok()
    );
}

#[test]
fn transparent_tcp_listens_on_the_rules_ports_and_answers_the_names_they_admit() {
    let p = policy(
        "allow a.test\nallow b.test:8080\nallow *.c.test:*\nallow d.test:3128\nallow 10.0.0.0/8:22\ndeny bad.c.test:*",
    )
    .with_transparent_tcp();
    assert!(p.transparent_tcp());
    assert_eq!(p.transparent_ports(), [22, 80, 443, 8080]);
    let ports = p.transparent_ports();
    let all = EgressNarrowing::default();
    for name in ["a.test", "b.test", "x.c.test"] {
        assert!(p.answers(name, &ports, &all), "{name}");
    }
    // Denied, not listed, listed on a port it does not listen on only, or an address.
    for name in ["bad.c.test", "c.test", "other.test", "d.test"] {
        assert!(!p.answers(name, &ports, &all), "{name}");
    }
    let narrowed =
        EgressNarrowing::new(Some(vec![HostRule::parse("a.test").expect("rule")]), vec![]);
    assert!(p.answers("a.test", &ports, &narrowed));
    assert!(!p.answers("b.test", &ports, &narrowed));
}

#[test]
fn the_synthetic_addresses_are_one_per_name_and_bounded() {
    let mut names = super::session::Synthetic::default();
    let a = names.address_of("a.test").expect("given");
    assert_eq!(a, std::net::Ipv4Addr::new(198, 18, 0, 1));
    assert_eq!(names.address_of("a.test"), Some(a));
    let b = names.address_of("b.test").expect("given");
    assert_ne!(a, b);
    assert_eq!(names.name_of(b), Some("b.test"));
    for n in 2..4096 {
        assert!(names.address_of(&format!("n{n}.test")).is_some());
    }
    assert_eq!(names.address_of("one-too-many.test"), None);
    assert_eq!(names.address_of("a.test"), Some(a));
    assert!(super::transparent::is_synthetic(
        names.address_of("n4095.test").expect("given")
    ));
}
