//! Who `capfs serve` acts as. One identity for everything an agent causes: the files the file
//! side creates and replaces, and the processes it starts. Started as root, the server finds
//! it (`--user`, else the owner of the roots), prepares what only root can (the listening
//! socket, the roots' handles, the audit log), then becomes it
//! for good before it serves anything: the file side then has that user's powers, never
//! root's. Started as another user, it acts as itself.

use capfs::Sandbox;
use capfs::identity::Identity;

use crate::fail::{self, Failure};

/// The flag that names the user, as the errors name it.
const USER_FLAG: &str = "--user UID[:GID] (or --exec-user UID[:GID])";

/// The identity to act as: `user` when given, else the server's own when it is not root, else
/// the owner of the roots. Processes (`exec`) never run as root.
///
/// # Errors
///
/// A usage failure naming the flag to add: roots of different owners, processes with roots
/// that belong to root, a user other than the server's own when it is not root.
pub fn choose(
    user: Option<(u32, u32)>,
    sandbox: &Sandbox,
    exec: bool,
) -> Result<Identity, Failure> {
    let current = Identity::current();
    let identity = match user {
        Some((uid, gid)) => {
            let named = Identity::new(uid, gid);
            if !current.is_root() && named.uid != current.uid {
                return Err(Failure::usage(format!(
                    "--user {uid}:{gid}: this server runs as {current}, not root, and can act as no one else"
                )));
            }
            named
        }
        None if !current.is_root() => current,
        None => Identity::owner_of(sandbox).map_err(|e| {
            Failure::usage(format!(
                "{}; name it with {USER_FLAG}",
                fail::reason(&e, "")
            ))
        })?,
    };
    if exec && (identity.uid == 0 || identity.gid == 0) {
        let why = match user {
            Some(_) => "processes never run as user or group 0".to_owned(),
            None => "--exec: the roots belong to root, and processes never run as root".to_owned(),
        };
        return Err(Failure::usage(format!(
            "{why}: name an unprivileged user that can write the read-write roots with {USER_FLAG}, \
             e.g. a uid used by nothing else"
        )));
    }
    Ok(identity)
}

/// Becomes `identity` and checks that it reaches every root of `roots` with its access.
///
/// # Errors
///
/// A failure naming what blocks the way to a root (its ancestor, mode and owner).
pub fn become_and_check(
    identity: Identity,
    roots: &[(capfs::AbsolutePathBuf, capfs::Access)],
) -> Result<(), Failure> {
    identity.assume().map_err(|e| {
        Failure::plain(
            format!("cannot act as {identity}: {}", fail::reason(&e, "")),
            1,
        )
    })?;
    for (root, access) in roots {
        identity
            .check_reach(root.as_path(), *access)
            .map_err(|e| Failure::plain(fail::reason(&e, ""), fail::EXIT_PERMISSION))?;
    }
    if !identity.is_root() {
        tracing::info!(uid = identity.uid, gid = identity.gid, "acting as");
    }
    Ok(())
}

/// The server's own readiness check (`GET /readyz`): it still acts as `identity`, and each
/// root's path still names the directory it served from the start (same device and inode; a
/// root removed or a volume unmounted is not) and is reached by `identity` with its access.
///
/// # Errors
///
/// A failure naming a root whose path cannot be looked at now.
pub fn readiness(
    identity: Identity,
    roots: &[(capfs::AbsolutePathBuf, capfs::Access)],
) -> Result<capfs_wire::server::Readiness, Failure> {
    use std::os::unix::fs::MetadataExt;
    let mut served = Vec::new();
    for (root, access) in roots {
        let metadata = std::fs::metadata(root.as_path())
            .map_err(|e| Failure::at("cannot stat", &root.to_string(), &e))?;
        served.push((root.clone(), *access, (metadata.dev(), metadata.ino())));
    }
    Ok(capfs_wire::server::Readiness(std::sync::Arc::new(
        move || {
            let now = Identity::current();
            if now != identity {
                return Err(std::io::Error::other(format!(
                    "acting as {now}, not {identity}"
                )));
            }
            for (root, access, served_identity) in &served {
                let metadata = std::fs::metadata(root.as_path())?;
                if (metadata.dev(), metadata.ino()) != *served_identity {
                    return Err(std::io::Error::other(format!(
                        "{root} is no longer the directory served"
                    )));
                }
                identity.check_reach(root.as_path(), *access)?;
            }
            Ok(())
        },
    )))
}

/// Parses an octal umask (`022`, `0o077`).
pub fn parse_umask(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    match u32::from_str_radix(digits, 8) {
        Ok(mask) if mask <= 0o777 && !digits.is_empty() => Ok(mask),
        _ => Err(format!(
            "{text:?} is not an octal umask (000 to 777, e.g. 022)"
        )),
    }
}

/// Sets the umask every file and directory the server and its processes create gets.
pub fn set_umask(mask: u32) {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_umask_is_three_octal_digits_at_most_777() {
        assert_eq!(parse_umask("022"), Ok(0o022));
        assert_eq!(parse_umask("0o077"), Ok(0o077));
        assert_eq!(parse_umask("7"), Ok(0o7));
        assert!(parse_umask("888").is_err());
        assert!(parse_umask("1000").is_err());
        assert!(parse_umask("").is_err());
        assert!(parse_umask("u=rwx").is_err());
    }
}
