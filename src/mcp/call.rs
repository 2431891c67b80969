//! What every tool shares: the view of one call (the backend and the allowed directories), a
//! tool argument turned into a path inside them, the result and its error text.

use std::path::Path;

use rmcp::model::ContentBlock;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::roots::{Allowed, containing, unalias};
use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// A tool's result.
pub(crate) enum Output {
    /// One text block, mirrored as `structuredContent.content`.
    Text(String),
    /// Content blocks and the structured content beside them.
    Blocks {
        blocks: Vec<ContentBlock>,
        structured: Value,
    },
}

pub(super) type ToolResult = Result<Output, String>;

/// One tool call's view of the server.
pub(crate) struct Tools<'a> {
    pub fs: &'a dyn ExecutorFileSystem,
    pub allowed: Vec<Allowed>,
    /// Why no directory is allowed, when none is.
    pub none_because: Option<String>,
}

/// The arguments of a tool that takes one path.
#[derive(Deserialize)]
pub(super) struct PathArgs {
    pub(super) path: String,
}

pub(super) fn args<T: DeserializeOwned>(tool: &str, value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("invalid arguments for tool {tool}: {e}"))
}

pub(super) fn io_text(e: std::io::Error) -> String {
    e.to_string()
}

/// The text of `e`, starting with `path` (capfs's own errors already do).
pub(super) fn at_path(path: &AbsolutePathBuf, e: std::io::Error) -> String {
    let text = e.to_string();
    let named = path.to_string();
    if text.starts_with(&named) {
        text
    } else {
        format!("{named}: {text}")
    }
}

impl Tools<'_> {
    fn allowed_list(&self) -> String {
        self.allowed
            .iter()
            .map(|a| a.path.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The absolute path a tool argument names: `~` is the home directory, a relative path is
    /// taken from the first allowed directory under which it stays (else the first), `..`
    /// is resolved by the name alone. Only paths inside an allowed directory are returned;
    /// the backend then confines every step below it.
    pub(super) fn resolve(&self, input: &str) -> Result<AbsolutePathBuf, String> {
        if let Some(why) = &self.none_because {
            return Err(format!("{input}: {why}"));
        }
        let expanded = match input.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                let home = std::env::var("HOME").unwrap_or_else(|_| "/".to_string());
                format!("{home}{rest}")
            }
            _ => input.to_string(),
        };
        let path = if Path::new(&expanded).is_absolute() {
            unalias(
                &self.allowed,
                &AbsolutePathBuf::new(&expanded).map_err(io_text)?,
            )
        } else {
            let first = self
                .allowed
                .first()
                .ok_or_else(|| "no allowed directories".to_string())?;
            let candidates = self
                .allowed
                .iter()
                .filter_map(|a| a.path.join(&expanded).ok());
            let mut chosen = None;
            for candidate in candidates {
                if containing(&self.allowed, &candidate).is_some() {
                    chosen = Some(candidate);
                    break;
                }
            }
            match chosen {
                Some(p) => p,
                None => first.path.join(&expanded).map_err(io_text)?,
            }
        };
        if containing(&self.allowed, &path).is_none() {
            return Err(format!(
                "Access denied - path outside allowed directories: {path} not in {}",
                self.allowed_list()
            ));
        }
        Ok(path)
    }

    /// Like [`resolve`](Self::resolve), and refuses paths under a read-only directory.
    pub(super) fn resolve_writable(
        &self,
        input: &str,
        tool: &str,
    ) -> Result<AbsolutePathBuf, String> {
        let path = self.resolve(input)?;
        match containing(&self.allowed, &path) {
            Some(a) if a.read_only => Err(format!(
                "{path}: {} is read-only: {tool} changes nothing there",
                a.path
            )),
            _ => Ok(path),
        }
    }
}
