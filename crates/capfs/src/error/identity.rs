//! The errors of the identity a server acts as: roots of different owners, a user that cannot
//! be become, a root the user cannot reach, a replaced file whose owner cannot be kept.

use std::io::{self, ErrorKind};
use std::path::Path;

use crate::identity::Identity;
use crate::path::AbsolutePathBuf;

pub(crate) fn roots_of_different_owners(
    a: &AbsolutePathBuf,
    a_uid: u32,
    b: &AbsolutePathBuf,
    b_uid: u32,
) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!(
            "the roots belong to different users ({a} to uid {a_uid}, {b} to uid {b_uid}): \
             name the one user to act as"
        ),
    )
}

pub(crate) fn cannot_become(current: Identity, wanted: Identity) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("running as {current}, not root: cannot act as {wanted}"),
    )
}

/// `dir` blocks `who` on the way to a root: it lacks `what` there.
pub(crate) fn unreachable_root(
    dir: &Path,
    what: &str,
    who: Identity,
    found: Option<(u32, u32, u32)>,
    err: &io::Error,
) -> io::Error {
    let found = match found {
        Some((mode, uid, gid)) => format!("mode {mode:04o}, owner uid {uid} gid {gid}"),
        None => "its mode and owner unreadable".to_owned(),
    };
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "{who} cannot reach a root: {} ({found}) does not allow it {what} ({err})",
            dir.display()
        ),
    )
}

/// A file about to be replaced whose owner or group this process cannot give its replacement.
pub(crate) fn owner_not_kept(uid: u32, gid: u32) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "the file belongs to uid {uid} gid {gid}, which this server cannot give the new \
             content (it acts as {}); the file is left as it was",
            Identity::current()
        ),
    )
}
