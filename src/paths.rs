//! Sandbox paths as the user types them: relative ones resolved against `--cd` or the only
//! root, glob patterns expanded against directory listings.

use capfs::{AbsolutePathBuf, ExecutorFileSystem, RootAccess};

use crate::fail::{EXIT_NOT_FOUND, Failure};
use crate::names::quote;

/// A sandbox root as the client knows it.
#[derive(Clone, Debug)]
pub struct RootInfo {
    pub path: AbsolutePathBuf,
    pub read_only: bool,
}

/// The roots `fs` serves: a local sandbox's, or those the server announced.
pub fn roots_of(fs: &dyn ExecutorFileSystem) -> Vec<RootInfo> {
    fs.served_roots()
        .into_iter()
        .map(|r| RootInfo {
            path: r.path,
            read_only: r.access == RootAccess::ReadOnly,
        })
        .collect()
}

/// Turns arguments into sandbox paths.
pub struct Resolver {
    start: Option<AbsolutePathBuf>,
    roots: Vec<RootInfo>,
    globbing: bool,
}

impl Resolver {
    /// `cd` (itself resolved against the only root when relative) or the only root is where
    /// relative paths start; `globbing` false takes every argument literally.
    pub fn new(cd: Option<&str>, roots: Vec<RootInfo>, globbing: bool) -> Result<Self, Failure> {
        let only_root = match roots.as_slice() {
            [only] => Some(only.path.clone()),
            _ => None,
        };
        let mut resolver = Self {
            start: only_root,
            roots,
            globbing,
        };
        if let Some(cd) = cd {
            resolver.start = Some(resolver.path(cd)?);
        }
        Ok(resolver)
    }

    /// The roots, as the server announced them (empty when it did not).
    pub fn roots(&self) -> &[RootInfo] {
        &self.roots
    }

    /// One sandbox path, taken literally.
    pub fn path(&self, arg: &str) -> Result<AbsolutePathBuf, Failure> {
        let invalid = |e: std::io::Error| {
            Failure::usage(format!("{}: {}", quote(arg), crate::fail::reason(&e, arg)))
        };
        if arg.starts_with('/') {
            return AbsolutePathBuf::new(arg).map_err(invalid);
        }
        match &self.start {
            Some(start) => start.join(arg).map_err(invalid),
            None => Err(Failure::usage(format!(
                "{}: a relative path needs a starting directory: give --cd DIR or an absolute \
                 path{}",
                quote(arg),
                self.roots_hint()
            ))),
        }
    }

    /// One sandbox path whose text is not UTF-8, taken literally: its exact bytes.
    pub fn path_os(&self, arg: &std::ffi::OsStr) -> Result<AbsolutePathBuf, Failure> {
        let shown = crate::names::escape(std::os::unix::ffi::OsStrExt::as_bytes(arg));
        let invalid =
            |e: std::io::Error| Failure::usage(format!("{shown}: {}", crate::fail::reason(&e, "")));
        let path = std::path::Path::new(arg);
        if path.is_absolute() {
            return AbsolutePathBuf::new(path).map_err(invalid);
        }
        match &self.start {
            Some(start) => start.join(path).map_err(invalid),
            None => Err(Failure::usage(format!(
                "{shown}: a relative path needs a starting directory: give --cd DIR or an \
                 absolute path{}",
                self.roots_hint()
            ))),
        }
    }

    fn roots_hint(&self) -> String {
        if self.roots.is_empty() {
            return String::new();
        }
        let names: Vec<String> = self.roots.iter().map(|r| r.path.to_string()).collect();
        format!(" (the roots are {})", names.join(", "))
    }

    /// Every sandbox path `arg` names: itself, or the paths its glob pattern matches (sorted),
    /// found by listing directories. A pattern that matches nothing fails.
    pub async fn expand(
        &self,
        fs: &dyn ExecutorFileSystem,
        arg: &str,
    ) -> Result<Vec<AbsolutePathBuf>, Failure> {
        let path = self.path(arg)?;
        if !self.globbing || !has_pattern(path.as_path().to_string_lossy().as_ref()) {
            return Ok(vec![path]);
        }
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: true,
        };
        let mut found = vec![AbsolutePathBuf::new("/").expect("/ is absolute")];
        for component in path.as_path().iter().skip(1) {
            let text = component.to_string_lossy();
            if !has_pattern(&text) {
                for p in &mut found {
                    *p = p.join(component).expect("a component holds no NUL");
                }
                continue;
            }
            let pattern = glob::Pattern::new(&text).map_err(|e| {
                Failure::usage(format!("{}: bad glob pattern: {}", quote(arg), e.msg))
            })?;
            let mut next = Vec::new();
            for dir in &found {
                // A directory that cannot be listed matches nothing, as in a shell; a listing
                // the server got wrong is an error.
                let entries = match fs.read_directory(dir).await {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                        return Err(Failure::at_path("cannot open directory", dir, &e));
                    }
                    Err(_) => continue,
                };
                // Matched on the text, joined by the exact name.
                let mut names: Vec<std::ffi::OsString> = entries
                    .iter()
                    .filter(|e| pattern.matches_with(&e.file_name, options))
                    .map(|e| e.name().to_os_string())
                    .collect();
                names.sort();
                for name in names {
                    next.push(
                        dir.join(&name)
                            .map_err(|e| Failure::at_path("cannot open directory", dir, &e))?,
                    );
                }
            }
            found = next;
        }
        if found.is_empty() {
            return Err(Failure::plain(
                format!("no match for {}", quote(arg)),
                EXIT_NOT_FOUND,
            ));
        }
        Ok(found)
    }
}

/// True when `text` holds a glob metacharacter.
fn has_pattern(text: &str) -> bool {
    text.contains(['*', '?', '['])
}
