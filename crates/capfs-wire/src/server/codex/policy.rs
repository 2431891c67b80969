//! The per-request `sandbox` of the current codex protocol (`FileSystemSandboxContext`): the
//! turn's permission profile, honoured as a narrowing of what capfs's roots allow, never as a
//! widening. A request may touch a path only where both allow it: a read-only turn cannot write
//! under a read-write root, and the `.git`, `.agents` and `.codex` entries codex marks read-only
//! stay so.
//!
//! The policy is the client's own intent: a client may send none, and capfs's roots, enforced
//! on handles, are the boundary whatever it sends. Paths are matched after their links are
//! resolved (through the trait, inside the roots), so a link cannot carry a write from a
//! writable entry into a read-only one.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::canonical;
use crate::error;
use crate::protocol::uri::path_of_uri;
use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// What a request does to a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    Read,
    Write,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Access {
    Read,
    Write,
    Deny,
}

struct Entry {
    /// A path prefix, or a glob over whole paths.
    target: Target,
    access: Access,
}

enum Target {
    Prefix(PathBuf),
    Glob(globset::GlobMatcher),
}

/// A parsed policy: `None` where the turn is unrestricted.
pub(crate) struct Policy {
    entries: Vec<Entry>,
}

/// A path as the policy writes it: a `file:` URI or a plain absolute path.
fn policy_path(text: &str) -> io::Result<PathBuf> {
    if text.starts_with('/') {
        return Ok(AbsolutePathBuf::new(text)?.into_path_buf());
    }
    path_of_uri(text)
        .map(AbsolutePathBuf::into_path_buf)
        .map_err(|e| error::bad_policy(e.message))
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

impl Policy {
    /// The policy in `sandbox`, or `None` when it restricts nothing (`null`, or an unrestricted
    /// file system). A shape capfs does not know restricts everything to reads.
    pub(crate) fn parse(sandbox: Option<&Value>) -> io::Result<Option<Self>> {
        let Some(sandbox) = sandbox.filter(|s| !s.is_null()) else {
            return Ok(None);
        };
        let permissions = &sandbox["permissions"];
        let file_system = &permissions["file_system"];
        if permissions["type"] == "managed" && file_system["type"] == "unrestricted" {
            return Ok(None);
        }
        if permissions["type"] != "managed" || file_system["type"] != "restricted" {
            // Not a profile capfs can read: reads everywhere the roots allow, no writes.
            let root = Entry {
                target: Target::Prefix(PathBuf::from("/")),
                access: Access::Read,
            };
            return Ok(Some(Self {
                entries: vec![root],
            }));
        }
        let mut workspace: Vec<PathBuf> = Vec::new();
        for root in strings(sandbox.get("workspaceRoots")) {
            workspace.push(policy_path(root)?);
        }
        if workspace.is_empty()
            && let Some(cwd) = sandbox["cwd"].as_str()
        {
            workspace.push(policy_path(cwd)?);
        }
        let mut entries = Vec::new();
        for entry in file_system["entries"].as_array().into_iter().flatten() {
            let access = match entry["access"].as_str() {
                Some("read") => Access::Read,
                Some("write") => Access::Write,
                Some("deny" | "none") => Access::Deny,
                other => return Err(error::bad_policy(format_args!("unknown access {other:?}"))),
            };
            let path = &entry["path"];
            let targets: Vec<Target> = match path["type"].as_str() {
                Some("path") => vec![Target::Prefix(policy_path(
                    path["path"].as_str().unwrap_or_default(),
                )?)],
                Some("glob_pattern") => {
                    let pattern = path["pattern"].as_str().unwrap_or_default();
                    let glob = globset::Glob::new(pattern)
                        .map_err(|e| error::bad_policy(format_args!("glob {pattern:?}: {e}")))?;
                    vec![Target::Glob(glob.compile_matcher())]
                }
                Some("special") => special(&path["value"], &workspace),
                other => {
                    return Err(error::bad_policy(format_args!(
                        "unknown path type {other:?}"
                    )));
                }
            };
            entries.extend(targets.into_iter().map(|target| Entry { target, access }));
        }
        Ok(Some(Self { entries }))
    }

    /// The access the policy gives `path`: a matching deny wins; otherwise the longest matching
    /// prefix decides, write over read on a tie; nothing matching gives nothing.
    fn access(&self, path: &Path) -> Option<Access> {
        let mut best: Option<(usize, Access)> = None;
        for entry in &self.entries {
            let length = match &entry.target {
                Target::Prefix(prefix) if path.starts_with(prefix) => prefix.as_os_str().len(),
                Target::Glob(glob) if glob.is_match(path) => usize::MAX,
                _ => continue,
            };
            if entry.access == Access::Deny {
                return Some(Access::Deny);
            }
            if best.is_none_or(|(l, a)| length > l || (length == l && entry.access > a)) {
                best = Some((length, entry.access));
            }
        }
        best.map(|(_, access)| access)
    }

    /// Refuses `need` on `path` unless the policy gives it. The path is matched with its links
    /// resolved: the deepest part of it that exists, resolved inside the roots, and the rest.
    /// The roots a process under this policy gets, of `roots` (the connection's): each root
    /// with at most the access the policy gives it, and each directory the policy names inside
    /// a root with at most its own; a root the policy gives nothing is left out. Never more
    /// than `roots`.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` when the policy denies or matches by pattern something inside a
    /// root: a process's roots cannot leave a hole, so such a policy is refused rather than
    /// widened.
    pub(crate) fn narrowing(
        &self,
        roots: &[(AbsolutePathBuf, capfs::Access)],
    ) -> io::Result<Vec<(AbsolutePathBuf, capfs::Access)>> {
        let cap = |access: Option<Access>, root: capfs::Access| match (access, root) {
            (Some(Access::Write), root) => Some(root),
            (Some(Access::Read), _) => Some(capfs::Access::ReadOnly),
            (Some(Access::Deny) | None, _) => None,
        };
        let mut out = Vec::new();
        for (root, root_access) in roots {
            for entry in &self.entries {
                let hole = match &entry.target {
                    Target::Glob(_) => entry.access != Access::Write,
                    // A denial over the whole root only leaves the root out.
                    Target::Prefix(p) => {
                        entry.access == Access::Deny
                            && p.starts_with(root.as_path())
                            && p != root.as_path()
                    }
                };
                if hole {
                    return Err(error::policy_denies_part_of_root(root));
                }
            }
            let outer = cap(self.access(root.as_path()), *root_access);
            if let Some(access) = outer {
                out.push((root.clone(), access));
            }
            for entry in &self.entries {
                let Target::Prefix(p) = &entry.target else {
                    continue;
                };
                if !p.starts_with(root.as_path()) || p == root.as_path() {
                    continue;
                }
                let inner = cap(self.access(p), *root_access);
                match (outer, inner) {
                    // Already allowed as much by its root.
                    (Some(capfs::Access::ReadOnly), Some(capfs::Access::ReadOnly)) => {}
                    (Some(capfs::Access::ReadWrite), Some(capfs::Access::ReadWrite)) => {}
                    (Some(capfs::Access::ReadOnly), Some(capfs::Access::ReadWrite)) => {
                        out.push((AbsolutePathBuf::new(p)?, capfs::Access::ReadWrite));
                    }
                    // A read-only directory inside a writable root: a process gets it as a
                    // read-only mount over itself. One that does not exist has nothing to keep
                    // (a mount needs something to cover).
                    (Some(capfs::Access::ReadWrite), Some(capfs::Access::ReadOnly))
                        if p.symlink_metadata().is_ok() =>
                    {
                        out.push((AbsolutePathBuf::new(p)?, capfs::Access::ReadOnly));
                    }
                    // Nothing allowed inside an allowed root: a process's rules only add up,
                    // so this cannot be kept, and is refused unless there is nothing there.
                    (Some(_), _) if p.symlink_metadata().is_ok() => {
                        return Err(error::policy_denies_inside_root(p.display()));
                    }
                    (Some(_), _) => {}
                    (None, Some(access)) => {
                        out.push((AbsolutePathBuf::new(p)?, access));
                    }
                    (None, None) => {}
                }
            }
        }
        Ok(out)
    }

    pub(crate) async fn check(
        &self,
        fs: &dyn ExecutorFileSystem,
        path: &AbsolutePathBuf,
        need: Need,
    ) -> io::Result<()> {
        let resolved = resolve_existing(fs, path).await;
        let allowed = match self.access(resolved.as_path()) {
            Some(Access::Write) => true,
            Some(Access::Read) => need == Need::Read,
            Some(Access::Deny) | None => false,
        };
        if allowed {
            return Ok(());
        }
        let what = match need {
            Need::Read => "read",
            Need::Write => "write",
        };
        Err(error::policy_denies(path, what))
    }
}

/// What one special path names.
fn special(value: &Value, workspace: &[PathBuf]) -> Vec<Target> {
    let subpath = value["subpath"].as_str().map(Path::new);
    let prefix = |p: PathBuf| Target::Prefix(p);
    match value["kind"].as_str() {
        Some("root") => vec![prefix(PathBuf::from("/"))],
        Some("project_roots" | "current_working_directory") => workspace
            .iter()
            .map(|root| prefix(subpath.map_or_else(|| root.clone(), |s| root.join(s))))
            .collect(),
        Some("slash_tmp") => vec![prefix(PathBuf::from("/tmp"))],
        Some("tmpdir") => std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(prefix)
            .into_iter()
            .collect(),
        // `minimal` (the platform's own files) and kinds capfs does not know name nothing it
        // serves.
        _ => Vec::new(),
    }
}

/// `path` with the links of its deepest existing ancestor resolved; the path itself where even
/// that cannot be resolved (the roots then refuse it anyway).
async fn resolve_existing(fs: &dyn ExecutorFileSystem, path: &AbsolutePathBuf) -> PathBuf {
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut at = path.clone();
    loop {
        if let Ok(resolved) = canonical::canonicalize(fs, &at).await {
            let mut full = resolved.into_path_buf();
            full.extend(rest.iter().rev());
            return full;
        }
        match (at.file_name().map(ToOwned::to_owned), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent;
            }
            _ => return path.as_path().to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The profile codex 0.169 sends in `workspace-write` mode, with `/ws` as the workspace.
    fn workspace_write() -> Value {
        let special = |kind: &str, subpath: Option<&str>, access: &str| {
            let mut value = serde_json::json!({"kind": kind});
            if let Some(subpath) = subpath {
                value["subpath"] = subpath.into();
            }
            serde_json::json!({"path": {"type": "special", "value": value}, "access": access})
        };
        serde_json::json!({
            "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
                special("root", None, "read"),
                special("project_roots", None, "write"),
                special("slash_tmp", None, "write"),
                special("project_roots", Some(".git"), "read"),
                special("project_roots", Some(".agents"), "read"),
                special("project_roots", Some(".codex"), "read"),
                {"path": {"type": "path", "path": "file:///ws/secret"}, "access": "deny"},
                {"path": {"type": "glob_pattern", "pattern": "/ws/**/*.key"}, "access": "deny"},
            ]}, "network": "restricted"},
            "cwd": "file:///ws",
            "workspaceRoots": ["file:///ws"],
        })
    }

    fn access(policy: &Policy, path: &str) -> Option<Access> {
        policy.access(Path::new(path))
    }

    #[test]
    fn each_entry_kind_narrows_as_codex_means_it() {
        let policy = Policy::parse(Some(&workspace_write())).unwrap().unwrap();
        assert_eq!(access(&policy, "/ws/src/a.rs"), Some(Access::Write));
        assert_eq!(access(&policy, "/ws"), Some(Access::Write));
        assert_eq!(access(&policy, "/ws/.git/config"), Some(Access::Read));
        assert_eq!(access(&policy, "/ws/.agents"), Some(Access::Read));
        assert_eq!(access(&policy, "/ws/.codex/x"), Some(Access::Read));
        assert_eq!(
            access(&policy, "/ws/.gitignore"),
            Some(Access::Write),
            "a component, not a prefix"
        );
        assert_eq!(access(&policy, "/tmp/x"), Some(Access::Write));
        assert_eq!(access(&policy, "/srv/other"), Some(Access::Read));
        assert_eq!(access(&policy, "/ws/secret/x"), Some(Access::Deny));
        assert_eq!(access(&policy, "/ws/a/b/c.key"), Some(Access::Deny));
    }

    #[test]
    fn profiles_that_restrict_nothing_or_are_unknown() {
        assert!(Policy::parse(None).unwrap().is_none());
        assert!(Policy::parse(Some(&Value::Null)).unwrap().is_none());
        let open = serde_json::json!({"permissions": {"type": "managed", "file_system": {"type": "unrestricted"}}});
        assert!(Policy::parse(Some(&open)).unwrap().is_none());
        let unknown = serde_json::json!({"permissions": {"type": "external"}});
        let policy = Policy::parse(Some(&unknown)).unwrap().unwrap();
        assert_eq!(access(&policy, "/ws/a"), Some(Access::Read), "reads only");
        let read_only = serde_json::json!({"permissions": {"type": "managed", "file_system": {
            "type": "restricted",
            "entries": [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]}}});
        let policy = Policy::parse(Some(&read_only)).unwrap().unwrap();
        assert_eq!(access(&policy, "/ws/a"), Some(Access::Read));
        let nothing = serde_json::json!({"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": []}}});
        let policy = Policy::parse(Some(&nothing)).unwrap().unwrap();
        assert_eq!(access(&policy, "/ws/a"), None);
        let bad = serde_json::json!({"permissions": {"type": "managed", "file_system": {
            "type": "restricted", "entries": [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "all"}]}}});
        assert!(Policy::parse(Some(&bad)).is_err());
    }
}
