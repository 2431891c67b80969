//! A process's environment from codex's `envPolicy`. What codex calls the inherited
//! environment is here a fixed clean base, never the server's own: its token, its `CAPFS_*`
//! settings and whatever secrets its own environment holds never reach a process.

use std::collections::BTreeMap;

use crate::protocol::process::EnvPolicy;

/// `PATH` of the base environment.
pub(crate) const BASE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Name patterns dropped unless `ignoreDefaultExcludes`, as codex drops them.
const DEFAULT_EXCLUDES: [&str; 3] = ["*KEY*", "*SECRET*", "*TOKEN*"];

/// The base environment of a process in `cwd`: `PATH` ([`BASE_PATH`]), `HOME` (the working
/// directory, which an implementation with private homes replaces with the session's),
/// `LANG=C.UTF-8`, `SHELL=/bin/sh`, `TMPDIR=/tmp`, and `TERM` (`xterm-256color`
/// on a terminal, `dumb` otherwise).
pub(crate) fn base(cwd: &str, tty: bool) -> BTreeMap<String, String> {
    let term = if tty { "xterm-256color" } else { "dumb" };
    [
        ("PATH", BASE_PATH),
        ("HOME", cwd),
        ("LANG", "C.UTF-8"),
        ("SHELL", "/bin/sh"),
        ("TMPDIR", "/tmp"),
        ("TERM", term),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The environment of a start: what `policy` makes of the base, with `env` laid over it;
/// without a policy, `env` alone.
///
/// # Errors
///
/// An `inherit` other than `all`, `core` or `none`.
pub(crate) fn build(
    policy: Option<&EnvPolicy>,
    env: &BTreeMap<String, String>,
    base: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, String> {
    let mut vars = match policy {
        None => BTreeMap::new(),
        Some(policy) => {
            let mut vars = match policy.inherit.as_deref() {
                None | Some("all" | "core") => base,
                Some("none") => BTreeMap::new(),
                Some(other) => {
                    return Err(format!(
                        "envPolicy: inherit must be all, core or none, not {other:?}"
                    ));
                }
            };
            if !policy.ignore_default_excludes {
                vars.retain(|name, _| !DEFAULT_EXCLUDES.iter().any(|p| matches(p, name)));
            }
            vars.retain(|name, _| !policy.exclude.iter().any(|p| matches(p, name)));
            vars.extend(policy.set.clone());
            if !policy.include_only.is_empty() {
                vars.retain(|name, _| policy.include_only.iter().any(|p| matches(p, name)));
            }
            vars
        }
    };
    vars.extend(env.clone());
    Ok(vars.into_iter().collect())
}

/// Whether `name` matches `pattern` (`*` any run, `?` one character), ignoring ASCII case.
fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_uppercase().chars().collect();
    let n: Vec<char> = name.to_ascii_uppercase().chars().collect();
    // The classic two-pointer match with one backtrack point: linear in practice, and never
    // more than |p| * |n| steps.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(inherit: &str) -> EnvPolicy {
        EnvPolicy {
            inherit: Some(inherit.to_string()),
            ..EnvPolicy::default()
        }
    }

    #[test]
    fn patterns_match_as_codex_globs() {
        assert!(matches("*KEY*", "api_key"));
        assert!(matches("A?C", "abc"));
        assert!(!matches("A?C", "abbc"));
        assert!(matches("*", ""));
        assert!(!matches("PATH", "PATHS"));
    }

    #[test]
    fn the_policy_excludes_sets_and_keeps_only_then_env_wins() {
        let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
        let mut p = policy("all");
        p.set.insert("MY_TOKEN".into(), "t".into());
        p.exclude.push("t*".into());
        let vars = build(Some(&p), &env, base("/ws", false)).unwrap();
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["A", "HOME", "LANG", "MY_TOKEN", "PATH", "SHELL"]);
        p.include_only.push("p*".into());
        let vars = build(Some(&p), &env, base("/ws", false)).unwrap();
        assert_eq!(
            vars,
            [("A".into(), "1".into()), ("PATH".into(), BASE_PATH.into())]
        );
        assert!(
            build(Some(&policy("none")), &env, base("/ws", true))
                .unwrap()
                .len()
                == 1
        );
        assert!(build(Some(&policy("some")), &env, base("/ws", true)).is_err());
        assert_eq!(build(None, &env, base("/ws", true)).unwrap().len(), 1);
    }
}
