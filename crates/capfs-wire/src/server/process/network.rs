//! codex's managed network (`enforceManagedNetwork`, `networkProxy`) as a narrowing of the
//! server's egress policy: a client's domains can only take away from what the operator
//! allows, and a server whose processes have the host's network refuses to pretend.

use capfs::process::egress::{EgressNarrowing, HostRule};

use crate::protocol::network_proxy::NetworkProxyLaunch;

/// The narrowing of a start's managed network; `Ok(None)` when the client asks for none.
///
/// # Errors
///
/// Why the request cannot be held, for a `-32602` answer.
pub(crate) fn narrowing(
    enforce: bool,
    launch: Option<&NetworkProxyLaunch>,
    holdable: bool,
    transparent: bool,
) -> Result<Option<EgressNarrowing>, String> {
    if !enforce && launch.is_none() {
        return Ok(None);
    }
    if !holdable {
        return Err(
            "this executor cannot hold a managed network: its processes have the \
                    host's network or are unconfined"
                .into(),
        );
    }
    let nothing = EgressNarrowing::new(Some(Vec::new()), Vec::new());
    let Some(launch) = launch else {
        // codex: enforced with no proxy details, the executor fails closed.
        return Ok(Some(nothing));
    };
    // Served for every process when the operator turned it on, so asking changes nothing.
    if launch.transparent_tcp && !transparent {
        return Err(
            "transparent TCP is not served here (the operator's --exec-transparent-tcp): \
                    tools reach the network through HTTP_PROXY and ALL_PROXY"
                .into(),
        );
    }
    // `enableSocks5Udp` (on in codex's default configuration) is taken as a narrowing too:
    // the SOCKS5 proxy answers UDP ASSOCIATE with "command not supported", so UDP stays
    // unreachable, which is less than codex allows, never more.
    let proxy = &launch.proxy;
    let unix = proxy.unix_sockets.as_ref().is_some_and(|u| match u {
        serde_json::Value::Null => false,
        serde_json::Value::Object(map) => !map.is_empty(),
        serde_json::Value::Array(list) => !list.is_empty(),
        _ => true,
    });
    if unix || proxy.dangerously_allow_all_unix_sockets {
        return Err("UNIX sockets of the host are not served to processes".into());
    }
    let read_only = match proxy.mode.as_deref() {
        None | Some("full") => false,
        Some("limited") => true,
        Some(other) => return Err(format!("the managed network mode {other:?} is not known")),
    };
    if !proxy.enabled {
        return Ok(Some(nothing));
    }
    let mut allow = Vec::new();
    let mut deny = Vec::new();
    let mut everything = false;
    for (pattern, permission) in proxy.domains.iter().flatten() {
        let rules = match pattern.as_str() {
            "*" => {
                everything |= permission == "allow";
                continue;
            }
            _ => rules_of(pattern),
        };
        match (permission.as_str(), rules) {
            // An allow capfs cannot read only narrows further by its absence.
            ("allow", Some(rules)) => allow.extend(rules),
            ("allow", None) => {}
            ("deny", Some(rules)) => deny.extend(rules),
            ("deny", None) => return Err(format!("the denied domain {pattern:?} is not held")),
            (other, _) => return Err(format!("{other:?} is not allow or deny")),
        }
    }
    let mut narrowing = EgressNarrowing::new((!everything).then_some(allow), deny);
    if read_only {
        narrowing = narrowing.read_only();
    }
    // codex's proxy refuses loopback and private destinations unless `allowLocalBinding`:
    // held the same way, whatever the operator pins or lists.
    if !proxy.allow_local_binding {
        narrowing = narrowing.without_local();
    }
    Ok(Some(narrowing))
}

/// codex's domain pattern as host rules on every port: `**.x` is `x` and every name below it.
fn rules_of(pattern: &str) -> Option<Vec<HostRule>> {
    let rule = |p: &str| HostRule::parse(&format!("{p}:*")).ok();
    match pattern.strip_prefix("**.") {
        Some(apex) => Some(vec![rule(apex)?, rule(&format!("*.{apex}"))?]),
        None => Some(vec![rule(pattern)?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(json: serde_json::Value) -> NetworkProxyLaunch {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn domains_become_a_narrowing_and_what_cannot_be_held_is_refused() {
        assert_eq!(narrowing(false, None, false, false), Ok(None));
        assert!(narrowing(true, None, false, false).is_err());
        let closed = narrowing(true, None, true, false).unwrap().unwrap();
        assert_eq!(closed.allow, Some(Vec::new()));
        let l = launch(
            serde_json::json!({"proxy": {"enabled": true, "mode": "full",
            "domains": {"**.pypi.org": "allow", "evil.pypi.org": "deny", "a b": "allow"}}}),
        );
        let n = narrowing(true, Some(&l), true, false).unwrap().unwrap();
        let allowed: Vec<String> = n.allow.unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(allowed, ["pypi.org:*", "*.pypi.org:*"]);
        assert_eq!(n.deny[0].to_string(), "evil.pypi.org:*");
        let star =
            launch(serde_json::json!({"proxy": {"enabled": true, "domains": {"*": "allow"}}}));
        assert_eq!(
            narrowing(false, Some(&star), true, false)
                .unwrap()
                .unwrap()
                .allow,
            None
        );
        // codex's default configuration asks for UDP through SOCKS5: held by serving none.
        let udp = launch(
            serde_json::json!({"proxy": {"enabled": true, "enableSocks5Udp": true,
            "domains": {"a.test": "allow"}}}),
        );
        let n = narrowing(true, Some(&udp), true, false).unwrap().unwrap();
        assert!(n.local_refused, "allowLocalBinding is off by default");
        assert_eq!(n.allow.unwrap()[0].to_string(), "a.test:*");
        let local = launch(serde_json::json!({"proxy": {"enabled": true,
            "allowLocalBinding": true}}));
        assert!(
            !narrowing(true, Some(&local), true, false)
                .unwrap()
                .unwrap()
                .local_refused
        );
        let limited = launch(serde_json::json!({"proxy": {"enabled": true, "mode": "limited"}}));
        assert!(
            narrowing(false, Some(&limited), true, false)
                .unwrap()
                .unwrap()
                .read_only
        );
        for refused in [
            serde_json::json!({"proxy": {"enabled": true}, "transparentTcp": true}),
            serde_json::json!({"proxy": {"enabled": true, "mode": "sideways"}}),
            serde_json::json!({"proxy": {"enabled": true, "unixSockets": {"/run/x": "allow"}}}),
            serde_json::json!({"proxy": {"enabled": true, "domains": {"a b": "deny"}}}),
        ] {
            assert!(
                narrowing(true, Some(&launch(refused.clone())), true, false).is_err(),
                "{refused}"
            );
        }
        // Transparent TCP: held where the operator serves it.
        let transparent =
            launch(serde_json::json!({"proxy": {"enabled": true}, "transparentTcp": true}));
        assert!(narrowing(true, Some(&transparent), true, true).is_ok());
    }
}
