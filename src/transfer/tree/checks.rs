//! What a walk must hold for its tree to be copied whole, and nothing else: names that are
//! each one plain component, every entry under a directory the walk listed as one, no name
//! listed twice in a directory, no entry left out, no cut but at its depth unless it says it
//! stopped. A walk that breaks one (a broken or lying server's) fails the plan, or is made
//! again by listing, before anything is copied: a copy is whole or it is an error.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use capfs::{AbsolutePathBuf, Walk, WalkEntry};

use super::{Side, name_of};
use crate::fail::{EXIT_FAILURE, Failure};
use crate::names::{escape, quote};

/// Every entry of `children` (by the bytes of its directory's path) lies in the top directory
/// or in one of `directories`, those the walk listed as directories (and so that the copy
/// enters): an entry under anything else would never be reached.
pub(super) fn all_reached(
    side: Side<'_>,
    top: &AbsolutePathBuf,
    children: &HashMap<OsString, Vec<WalkEntry>>,
    directories: &HashSet<OsString>,
) -> Result<(), Failure> {
    let unreached = children
        .iter()
        .filter(|(parent, _)| !parent.is_empty() && !directories.contains(*parent))
        .min_by(|a, b| a.0.cmp(b.0));
    let Some((parent, entries)) = unreached else {
        return Ok(());
    };
    let parent = Path::new(parent);
    let what = format!(
        "listed without its parent directory {}",
        quote(&side.show(top, parent))
    );
    Err(incomplete(
        side,
        top,
        &parent.join(name_of(&entries[0])),
        &what,
    ))
}

/// No name of the directory at `rel` is listed twice in `entries`, sorted by name: two
/// entries for one name (alike or not) cannot both be copied.
pub(super) fn none_twice(
    side: Side<'_>,
    top: &AbsolutePathBuf,
    rel: &Path,
    entries: &[WalkEntry],
) -> Result<(), Failure> {
    match entries
        .windows(2)
        .find(|w| name_of(&w[0]) == name_of(&w[1]))
    {
        Some(twice) => Err(incomplete(
            side,
            top,
            &rel.join(name_of(&twice[0])),
            "listed twice",
        )),
        None => Ok(()),
    }
}

/// The walk of the directory at `base` left out no entry: names that are not UTF-8 cannot
/// cross the wire, so a server leaves them out, and the copy would lack them.
pub(super) fn none_left_out(
    side: Side<'_>,
    top: &AbsolutePathBuf,
    base: &Path,
    omitted: u64,
) -> Result<(), Failure> {
    if omitted == 0 {
        return Ok(());
    }
    let what = format!("{omitted} entries below it whose names are not UTF-8 were left out");
    Err(incomplete(side, top, base, &what))
}

/// `walk` lists a directory at its level `levels` (1: the walked directory's own entries).
pub(super) fn reaches_level(walk: &Walk, levels: usize) -> bool {
    walk.entries.iter().any(|e| {
        let depth = match &e.raw_path {
            Some(raw) => raw.components().count(),
            None => e.path.split('/').count(),
        };
        e.is_directory && !e.is_symlink && depth == levels
    })
}

/// A walk of the tree that cannot be all of it: `what` is wrong with the entry at `rel`.
fn incomplete(side: Side<'_>, top: &AbsolutePathBuf, rel: &Path, what: &str) -> Failure {
    let by = if matches!(side, Side::Sandbox) {
        "the server"
    } else {
        "the walk"
    };
    Failure::plain(
        format!(
            "{}: {what} by {by}; {} copies no tree in part",
            quote(&side.show(top, rel)),
            side.command()
        ),
        EXIT_FAILURE,
    )
}

/// A walk entry's exact path below the walked directory `base`, when each of its names is one
/// plain component: anything else (a broken or hostile server's `..`) would land outside the
/// destination.
pub(super) fn valid_rel<'a>(
    side: Side<'_>,
    top: &AbsolutePathBuf,
    base: &Path,
    entry: &'a WalkEntry,
) -> Result<&'a Path, Failure> {
    let (rel, valid) = match &entry.raw_path {
        Some(raw) => (raw.as_path(), raw.iter().all(is_plain_name)),
        None => {
            let valid = entry.path.split('/').all(|n| is_plain_name(OsStr::new(n)));
            (Path::new(&entry.path), valid)
        }
    };
    if valid {
        return Ok(rel);
    }
    Err(Failure::plain(
        format!(
            "{}: the server listed an invalid name {}",
            quote(&side.show(top, base)),
            escape(rel.as_os_str().as_bytes())
        ),
        EXIT_FAILURE,
    ))
}

/// A name that is exactly one normal path component: not empty, `.` or `..`, without `/`.
fn is_plain_name(name: &OsStr) -> bool {
    let name = name.as_bytes();
    !matches!(name, b"" | b"." | b"..") && !name.contains(&b'/')
}
