//! `ls`, `stat` and `roots`: text like coreutils' for people, `--json` for scripts (one
//! document, stable field names, raw values).

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use futures_util::StreamExt;
use serde::Serialize;

use capfs::{AbsolutePathBuf, ExecutorFileSystem, FileMetadata};

use crate::fail::Failure;
use crate::names::{escape, to_json};
use crate::paths::RootInfo;

mod entry;
mod format;

use entry::Entry;
use format::{print_entries, print_stat};

/// Metadata calls `ls -l` keeps in flight at once.
const CONCURRENT_STATS: usize = 16;

fn kind_of(m: &FileMetadata) -> &'static str {
    if m.is_directory {
        "directory"
    } else if m.is_file {
        "file"
    } else {
        "other"
    }
}

/// Builds the entry of `path`. `is_symlink` says what the listing already knows; a link's
/// target may be missing, which is no error.
async fn entry(
    fs: &dyn ExecutorFileSystem,
    path: AbsolutePathBuf,
    is_symlink: Option<bool>,
) -> io::Result<Entry> {
    let metadata = fs.get_metadata(&path).await;
    let is_symlink = match (&metadata, is_symlink) {
        (_, Some(known)) => known,
        (Ok(m), None) => m.is_symlink,
        (Err(e), None) => return Err(io::Error::new(e.kind(), e.to_string())),
    };
    if !is_symlink {
        let m = metadata?;
        return Ok(Entry {
            mode: m.mode,
            size: m.size,
            modified_at_ms: m.modified_at_ms,
            created_at_ms: m.created_at_ms,
            ..Entry::at(&path, kind_of(&m))
        });
    }
    let target = fs
        .read_link(&path)
        .await
        .ok()
        .map(|t| t.to_string_lossy().into_owned());
    let (target_type, m) = match metadata {
        Ok(m) => (kind_of(&m), m),
        Err(_) => ("missing", FileMetadata::default()),
    };
    Ok(Entry {
        mode: m.mode,
        size: m.size,
        modified_at_ms: m.modified_at_ms,
        created_at_ms: m.created_at_ms,
        target,
        target_type: Some(target_type),
        ..Entry::at(&path, "symlink")
    })
}

/// `ls`: each path, a directory's entries sorted by name.
pub async fn ls(
    fs: &dyn ExecutorFileSystem,
    paths: &[AbsolutePathBuf],
    long: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut sections: Vec<(Option<AbsolutePathBuf>, Vec<Entry>)> = Vec::new();
    let mut failures = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        let metadata = match fs.get_metadata(path).await {
            Ok(m) => m,
            Err(e) => {
                failures.push(Failure::at_path("cannot access", path, &e));
                continue;
            }
        };
        // `ls -l LINK` shows the link itself, `ls LINK` what it points to, as ls does.
        if !metadata.is_directory || metadata.is_symlink && long {
            files.push((path, entry(fs, path.clone(), None).await));
            continue;
        }
        let mut listed = match fs.read_directory(path).await {
            Ok(listed) => listed,
            Err(e) => {
                failures.push(Failure::at_path("cannot open directory", path, &e));
                continue;
            }
        };
        listed.sort_by(|a, b| a.name().cmp(b.name()));
        let entries: Vec<Entry> = if long || json {
            let mut out = Vec::with_capacity(listed.len());
            let mut children = Vec::with_capacity(listed.len());
            for e in listed {
                match path.join(e.name()) {
                    Ok(child) => children.push((child, e.is_symlink)),
                    Err(err) => failures.push(Failure::at_path("cannot access", path, &err)),
                }
            }
            let mut stats = futures_util::stream::iter(
                children
                    .into_iter()
                    .map(|(child, is_symlink)| entry(fs, child, Some(is_symlink))),
            )
            .buffered(CONCURRENT_STATS);
            while let Some(result) = stats.next().await {
                match result {
                    Ok(entry) => out.push(entry),
                    // Removed since the listing: no longer there to show.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => failures.push(Failure::at_path("cannot access", path, &e)),
                }
            }
            out
        } else {
            let mut out = Vec::with_capacity(listed.len());
            for e in listed {
                let kind = if e.is_symlink {
                    "symlink"
                } else if e.is_directory {
                    "directory"
                } else if e.is_file {
                    "file"
                } else {
                    "other"
                };
                match path.join(e.name()) {
                    Ok(child) => out.push(Entry::at(&child, kind)),
                    Err(err) => failures.push(Failure::at_path("cannot access", path, &err)),
                }
            }
            out
        };
        sections.push((Some(path.clone()), entries));
    }
    let mut file_entries = Vec::new();
    for (path, result) in files {
        match result {
            Ok(e) => file_entries.push(e),
            Err(e) => failures.push(Failure::at_path("cannot access", path, &e)),
        }
    }
    let mut out = io::stdout().lock();
    let write = |r: io::Result<()>| r.map_err(|e| Failure::at("cannot write", "stdout", &e));
    if json {
        let all: Vec<&Entry> = file_entries
            .iter()
            .chain(sections.iter().flat_map(|(_, entries)| entries))
            .collect();
        write(to_json(&mut out, &all))?;
        write(writeln!(out))?;
    } else {
        let now = jiff::Timestamp::now();
        // Files named on the command line are shown by their path, as ls does.
        let named: Vec<Entry> = file_entries
            .into_iter()
            .map(|e| Entry {
                name: e.path.clone(),
                raw_name: e.raw_path.clone(),
                ..e
            })
            .collect();
        print_entries(&mut out, &named, long, now).map_err(stdout_failure)?;
        let headers = sections.len() + usize::from(!named.is_empty()) > 1;
        for (i, (path, entries)) in sections.iter().enumerate() {
            if headers {
                if i > 0 || !named.is_empty() {
                    write(writeln!(out))?;
                }
                if let Some(path) = path {
                    let raw = path.as_path().as_os_str().as_bytes();
                    write(writeln!(out, "{}:", escape(raw)))?;
                }
            }
            print_entries(&mut out, entries, long, now).map_err(stdout_failure)?;
        }
    }
    drop(out);
    first_failure(failures)
}

fn stdout_failure(e: io::Error) -> Failure {
    Failure::at("cannot write", "stdout", &e)
}

/// Prints every failure but the last, and returns the last (which main prints) as the result.
pub fn first_failure(mut failures: Vec<Failure>) -> Result<(), Failure> {
    let last = failures.pop();
    for failure in failures {
        let _ = failure.report();
    }
    last.map_or(Ok(()), Err)
}

/// `stat`: one block per path, or one JSON array.
pub async fn stat(
    fs: &dyn ExecutorFileSystem,
    paths: &[AbsolutePathBuf],
    json: bool,
) -> Result<(), Failure> {
    let mut entries = Vec::new();
    let mut failures = Vec::new();
    for path in paths {
        match entry(fs, path.clone(), None).await {
            Ok(e) => entries.push(e),
            Err(e) => failures.push(Failure::at_path("cannot stat", path, &e)),
        }
    }
    let mut out = io::stdout().lock();
    if json {
        to_json(&mut out, &entries)
            .and_then(|()| writeln!(out))
            .map_err(stdout_failure)?;
    } else {
        for e in &entries {
            print_stat(&mut out, e).map_err(stdout_failure)?;
        }
    }
    drop(out);
    first_failure(failures)
}

/// One root as `roots --json` prints it.
#[derive(Serialize)]
struct RootJson<'a> {
    path: String,
    access: &'a str,
}

/// `roots`: each root and its access.
pub fn roots(roots: &[RootInfo], json: bool) -> Result<(), Failure> {
    let access = |r: &RootInfo| {
        if r.read_only {
            "read-only"
        } else {
            "read-write"
        }
    };
    let mut out = io::stdout().lock();
    if json {
        let all: Vec<RootJson> = roots
            .iter()
            .map(|r| RootJson {
                path: r.path.to_string(),
                access: access(r),
            })
            .collect();
        to_json(&mut out, &all)
            .and_then(|()| writeln!(out))
            .map_err(stdout_failure)?;
        return Ok(());
    }
    for r in roots {
        writeln!(
            out,
            "{}\t{}",
            escape(r.path.to_string().as_bytes()),
            access(r)
        )
        .map_err(stdout_failure)?;
    }
    Ok(())
}
