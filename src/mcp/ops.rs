//! The tools themselves: arguments in, text out, every file system call through the backend.
//! The read tools are in `reads.rs`, the listing tools in `listing.rs`.

use std::path::Path;

use rmcp::model::ContentBlock;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::listing::PathArgs;
use super::roots::{Allowed, containing, unalias};
use super::text;
use capfs::{AbsolutePathBuf, CreateDirectoryOptions, ExecutorFileSystem, RenameOptions};

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

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Edit {
    old_text: String,
    new_text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EditArgs {
    path: String,
    edits: Vec<Edit>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
struct MoveArgs {
    source: String,
    destination: String,
}

fn args<T: DeserializeOwned>(tool: &str, value: Value) -> Result<T, String> {
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
    /// Runs tool `name`; `Err` is the text of a tool error.
    pub(crate) async fn call(&self, name: &str, arguments: Value) -> ToolResult {
        match name {
            "read_file" | "read_text_file" => self.read_text(args(name, arguments)?).await,
            "read_media_file" => self.read_media(args(name, arguments)?).await,
            "read_multiple_files" => self.read_multiple(args(name, arguments)?).await,
            "write_file" => self.write(args(name, arguments)?).await,
            "edit_file" => self.edit(args(name, arguments)?).await,
            "create_directory" => self.create_directory(args(name, arguments)?).await,
            "list_directory" => self.list(args(name, arguments)?).await,
            "list_directory_with_sizes" => self.list_with_sizes(args(name, arguments)?).await,
            "directory_tree" => self.tree(args(name, arguments)?).await,
            "move_file" => self.move_file(args(name, arguments)?).await,
            "search_files" => self.search(args(name, arguments)?).await,
            "get_file_info" => self.info(args(name, arguments)?).await,
            "list_allowed_directories" => Ok(self.allowed_output()),
            other => Err(format!("unknown tool: {other}")),
        }
    }

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
    fn resolve_writable(&self, input: &str, tool: &str) -> Result<AbsolutePathBuf, String> {
        let path = self.resolve(input)?;
        match containing(&self.allowed, &path) {
            Some(a) if a.read_only => Err(format!(
                "{path}: {} is read-only: {tool} changes nothing there",
                a.path
            )),
            _ => Ok(path),
        }
    }

    async fn write(&self, a: WriteArgs) -> ToolResult {
        let path = self.resolve_writable(&a.path, "write_file")?;
        self.fs
            .write_file(&path, a.content.into_bytes())
            .await
            .map_err(|e| at_path(&path, e))?;
        Ok(Output::Text(format!("Successfully wrote to {}", a.path)))
    }

    async fn edit(&self, a: EditArgs) -> ToolResult {
        let path = if a.dry_run {
            self.resolve(&a.path)?
        } else {
            self.resolve_writable(&a.path, "edit_file")?
        };
        let data = self
            .fs
            .read_file(&path)
            .await
            .map_err(|e| at_path(&path, e))?;
        let content = text::normalize_line_endings(&String::from_utf8_lossy(&data));
        let edits: Vec<(String, String)> = a
            .edits
            .into_iter()
            .map(|e| (e.old_text, e.new_text))
            .collect();
        let modified = text::apply_edits(&content, &edits)
            .map_err(|e| format!("Could not find exact match for edit:\n{}", e.0))?;
        let diff = text::unified_diff(&path.to_string_lossy(), &content, &modified);
        let mut fence = 3;
        while diff.contains(&"`".repeat(fence)) {
            fence += 1;
        }
        let fence = "`".repeat(fence);
        if !a.dry_run {
            self.fs
                .write_file(&path, modified.into_bytes())
                .await
                .map_err(|e| at_path(&path, e))?;
        }
        Ok(Output::Text(format!("{fence}diff\n{diff}{fence}\n\n")))
    }

    async fn create_directory(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve_writable(&a.path, "create_directory")?;
        self.fs
            .create_directory(
                &path,
                CreateDirectoryOptions::default().with_recursive(true),
            )
            .await
            .map_err(|e| at_path(&path, e))?;
        Ok(Output::Text(format!(
            "Successfully created directory {}",
            a.path
        )))
    }

    async fn move_file(&self, a: MoveArgs) -> ToolResult {
        let source = self.resolve_writable(&a.source, "move_file")?;
        let destination = self.resolve_writable(&a.destination, "move_file")?;
        self.fs
            .rename(
                &source,
                &destination,
                RenameOptions::default().with_overwrite(false),
            )
            .await
            .map_err(|e| at_path(&source, e))?;
        Ok(Output::Text(format!(
            "Successfully moved {} to {}",
            a.source, a.destination
        )))
    }

    async fn info(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let m = self
            .fs
            .get_metadata(&path)
            .await
            .map_err(|e| at_path(&path, e))?;
        Ok(Output::Text(format!(
            "size: {}\ncreated: {}\nmodified: {}\nisDirectory: {}\nisFile: {}\npermissions: {:03o}",
            m.size,
            text::format_date(m.created_at_ms),
            text::format_date(m.modified_at_ms),
            m.is_directory,
            m.is_file,
            m.mode & 0o777
        )))
    }

    /// `list_allowed_directories`: the reference's text (every line after the first a path),
    /// then, in a block of its own, which of them are read-only.
    fn allowed_output(&self) -> Output {
        if let Some(why) = &self.none_because {
            let text = "Allowed directories:\n".to_string();
            return Output::Blocks {
                blocks: vec![
                    ContentBlock::text(text.clone()),
                    ContentBlock::text(why.clone()),
                ],
                structured: json!({ "content": text }),
            };
        }
        let paths: Vec<String> = self.allowed.iter().map(|a| a.path.to_string()).collect();
        let text = format!("Allowed directories:\n{}", paths.join("\n"));
        let read_only: Vec<String> = self
            .allowed
            .iter()
            .filter(|a| a.read_only)
            .map(|a| a.path.to_string())
            .collect();
        if read_only.is_empty() {
            return Output::Text(text);
        }
        let note = format!(
            "Read-only (write_file, edit_file, create_directory and move_file refuse them):\n{}",
            read_only.join("\n")
        );
        Output::Blocks {
            blocks: vec![ContentBlock::text(text.clone()), ContentBlock::text(note)],
            structured: json!({ "content": text }),
        }
    }
}
