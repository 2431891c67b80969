//! The tools themselves: arguments in, text out, every file system call through the backend.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::future::join_all;
use rmcp::model::{ContentBlock, ResourceContents};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Allowed, containing, text};
use capfs::{
    AbsolutePathBuf, CreateDirectoryOptions, ExecutorFileSystem, ReadDirectoryEntry, RenameOptions,
    WalkOptions,
};

/// Deepest directory level `search_files` and `directory_tree` list.
pub(crate) const TREE_MAX_DEPTH: usize = 128;
/// Most entries `search_files` and `directory_tree` return.
pub(crate) const TREE_MAX_ENTRIES: usize = 100_000;

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

type ToolResult = Result<Output, String>;

/// One tool call's view of the server.
pub(crate) struct Tools<'a> {
    pub fs: &'a dyn ExecutorFileSystem,
    pub allowed: Vec<Allowed>,
}

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
struct ReadTextArgs {
    path: String,
    head: Option<f64>,
    tail: Option<f64>,
}

#[derive(Deserialize)]
struct PathsArgs {
    paths: Vec<String>,
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

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
enum SortBy {
    #[default]
    Name,
    Size,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SizesArgs {
    path: String,
    #[serde(default)]
    sort_by: SortBy,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TreeArgs {
    path: String,
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

#[derive(Deserialize)]
struct MoveArgs {
    source: String,
    destination: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchArgs {
    path: String,
    pattern: String,
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

fn args<T: DeserializeOwned>(tool: &str, value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("invalid arguments for tool {tool}: {e}"))
}

/// A line count given as a JSON number: positive ones count, others mean "not given".
fn line_count(n: Option<f64>) -> Option<usize> {
    n.filter(|n| *n >= 1.0).map(|n| n as usize)
}

fn mime_type(path: &str) -> &'static str {
    let extension = Path::new(path)
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase());
    match extension.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("bmp") => "image/bmp",
        Some("svg") => "image/svg+xml",
        Some("mp3") => "audio/mpeg",
        Some("wav") => "audio/wav",
        Some("ogg") => "audio/ogg",
        Some("flac") => "audio/flac",
        _ => "application/octet-stream",
    }
}

fn io_text(e: std::io::Error) -> String {
    e.to_string()
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
            "list_allowed_directories" => Ok(Output::Text(self.allowed_text())),
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
    fn resolve(&self, input: &str) -> Result<AbsolutePathBuf, String> {
        let expanded = match input.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                let home = std::env::var("HOME").unwrap_or_else(|_| "/".to_string());
                format!("{home}{rest}")
            }
            _ => input.to_string(),
        };
        let path = if Path::new(&expanded).is_absolute() {
            AbsolutePathBuf::new(&expanded).map_err(io_text)?
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

    async fn read_string(&self, path: &AbsolutePathBuf) -> Result<String, String> {
        let data = self.fs.read_file(path).await.map_err(io_text)?;
        Ok(String::from_utf8_lossy(&data).into_owned())
    }

    async fn read_text(&self, a: ReadTextArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let (head, tail) = (line_count(a.head), line_count(a.tail));
        if head.is_some() && tail.is_some() {
            return Err("Cannot specify both head and tail parameters simultaneously".into());
        }
        let content = self.read_string(&path).await?;
        let content = match (head, tail) {
            (_, Some(n)) => text::tail(&content, n),
            (Some(n), _) => text::head(&content, n),
            _ => content,
        };
        Ok(Output::Text(content))
    }

    async fn read_media(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let data = self.fs.read_file(&path).await.map_err(io_text)?;
        let mime = mime_type(&a.path);
        let data = STANDARD.encode(&data);
        let kind = mime.split('/').next().unwrap_or_default();
        let (block, item) = if kind == "image" || kind == "audio" {
            let item = json!({ "type": kind, "data": data, "mimeType": mime });
            let block = if kind == "image" {
                ContentBlock::image(data, mime)
            } else {
                ContentBlock::audio(data, mime)
            };
            (block, item)
        } else {
            let uri = text::file_url(&path.to_string_lossy());
            let item = json!({ "type": "resource", "resource": {
                "uri": uri, "mimeType": mime, "blob": data,
            } });
            let block = ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(mime.to_string()),
                blob: data,
                meta: None,
            });
            (block, item)
        };
        Ok(Output::Blocks {
            blocks: vec![block],
            structured: json!({ "content": [item] }),
        })
    }

    async fn read_multiple(&self, a: PathsArgs) -> ToolResult {
        if a.paths.is_empty() {
            return Err("invalid arguments for tool read_multiple_files: paths is empty".into());
        }
        let reads = a.paths.iter().map(|p| async move {
            let result = match self.resolve(p) {
                Ok(path) => self.read_string(&path).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(content) => format!("{p}:\n{content}\n"),
                Err(e) => format!("{p}: Error - {e}"),
            }
        });
        Ok(Output::Text(join_all(reads).await.join("\n---\n")))
    }

    async fn write(&self, a: WriteArgs) -> ToolResult {
        let path = self.resolve_writable(&a.path, "write_file")?;
        self.fs
            .write_file(&path, a.content.into_bytes())
            .await
            .map_err(io_text)?;
        Ok(Output::Text(format!("Successfully wrote to {}", a.path)))
    }

    async fn edit(&self, a: EditArgs) -> ToolResult {
        let path = if a.dry_run {
            self.resolve(&a.path)?
        } else {
            self.resolve_writable(&a.path, "edit_file")?
        };
        let content = text::normalize_line_endings(&self.read_string(&path).await?);
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
                .map_err(io_text)?;
        }
        Ok(Output::Text(format!("{fence}diff\n{diff}{fence}\n\n")))
    }

    async fn create_directory(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve_writable(&a.path, "create_directory")?;
        self.fs
            .create_directory(&path, CreateDirectoryOptions { recursive: true })
            .await
            .map_err(io_text)?;
        Ok(Output::Text(format!(
            "Successfully created directory {}",
            a.path
        )))
    }

    async fn list(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let entries = listable(self.fs.read_directory(&path).await.map_err(io_text)?);
        let lines: Vec<String> = entries
            .iter()
            .map(|e| {
                let tag = if e.is_directory { "[DIR]" } else { "[FILE]" };
                format!("{tag} {}", e.file_name)
            })
            .collect();
        Ok(Output::Text(lines.join("\n")))
    }

    async fn list_with_sizes(&self, a: SizesArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let entries = listable(self.fs.read_directory(&path).await.map_err(io_text)?);
        // Sizes of what the entries name, following links only inside the root: a link out
        // of it reports 0, like an entry that vanished.
        let sizes = join_all(entries.iter().map(|e| async {
            match path.join(&e.file_name) {
                Ok(child) => self.fs.get_metadata(&child).await.map_or(0, |m| m.size),
                Err(_) => 0,
            }
        }))
        .await;
        let mut rows: Vec<(&str, bool, u64)> = entries
            .iter()
            .zip(sizes)
            .map(|(e, size)| (e.file_name.as_str(), e.is_directory, size))
            .collect();
        let files = rows.iter().filter(|r| !r.1).count();
        let total: u64 = rows.iter().filter(|r| !r.1).map(|r| r.2).sum();
        if a.sort_by == SortBy::Size {
            rows.sort_by_key(|r| std::cmp::Reverse(r.2));
        } else {
            rows.sort_by(|x, y| text::compare_names(x.0, y.0));
        }
        let mut lines: Vec<String> = rows
            .iter()
            .map(|(name, is_dir, size)| {
                let tag = if *is_dir { "[DIR]" } else { "[FILE]" };
                let size = if *is_dir {
                    String::new()
                } else {
                    format!("{:>10}", text::format_size(*size))
                };
                format!("{tag} {name:<30} {size}")
            })
            .collect();
        lines.push(String::new());
        lines.push(format!(
            "Total: {files} files, {} directories",
            rows.len() - files
        ));
        lines.push(format!("Combined size: {}", text::format_size(total)));
        Ok(Output::Text(lines.join("\n")))
    }

    async fn tree(&self, a: TreeArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        // A pattern without `*` also names an entry at any depth, and everything below it.
        let mut exclude = Vec::new();
        for p in a.exclude_patterns {
            if !p.contains('*') {
                exclude.push(format!("**/{p}"));
                exclude.push(format!("**/{p}/**"));
            }
            exclude.push(p);
        }
        let options = WalkOptions {
            max_depth: TREE_MAX_DEPTH,
            max_entries: TREE_MAX_ENTRIES,
            pattern: None,
            exclude,
            sizes: false,
        };
        let walk = self.fs.walk(&path, &options).await.map_err(io_text)?;
        let tree = build_tree(
            walk.entries
                .iter()
                .map(|e| (e.path.as_str(), e.is_directory)),
        );
        let mut text =
            serde_json::to_string_pretty(&tree).expect("a tree of strings always serializes");
        let note = walk.truncated.then(|| truncation_note(&options));
        if let Some(note) = &note {
            text.push_str("\n\n");
            text.push_str(note);
        }
        Ok(Output::Text(text))
    }

    async fn move_file(&self, a: MoveArgs) -> ToolResult {
        let source = self.resolve_writable(&a.source, "move_file")?;
        let destination = self.resolve_writable(&a.destination, "move_file")?;
        self.fs
            .rename(&source, &destination, RenameOptions { overwrite: false })
            .await
            .map_err(io_text)?;
        Ok(Output::Text(format!(
            "Successfully moved {} to {}",
            a.source, a.destination
        )))
    }

    async fn search(&self, a: SearchArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let options = WalkOptions {
            max_depth: TREE_MAX_DEPTH,
            max_entries: TREE_MAX_ENTRIES,
            pattern: Some(a.pattern),
            exclude: a.exclude_patterns,
            sizes: false,
        };
        let walk = self.fs.walk(&path, &options).await.map_err(io_text)?;
        let base = path.to_string_lossy();
        let base = base.trim_end_matches('/');
        let mut lines: Vec<String> = walk
            .entries
            .iter()
            .map(|e| format!("{base}/{}", e.path))
            .collect();
        if lines.is_empty() {
            lines.push("No matches found".to_string());
        }
        if walk.truncated {
            lines.push(truncation_note(&options));
        }
        Ok(Output::Text(lines.join("\n")))
    }

    async fn info(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let m = self.fs.get_metadata(&path).await.map_err(io_text)?;
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

    fn allowed_text(&self) -> String {
        let lines: Vec<String> = self
            .allowed
            .iter()
            .map(|a| {
                if a.read_only {
                    format!("{} (read-only)", a.path)
                } else {
                    a.path.to_string()
                }
            })
            .collect();
        format!("Allowed directories:\n{}", lines.join("\n"))
    }
}

/// The entries a listing shows: those whose names are UTF-8. A lossy rendering of another name
/// would name a different entry or none (remote listings leave them out too).
fn listable(entries: Vec<ReadDirectoryEntry>) -> Vec<ReadDirectoryEntry> {
    entries.into_iter().filter(|e| !e.lossy_name).collect()
}

fn truncation_note(options: &WalkOptions) -> String {
    format!(
        "(results truncated: at most {} entries and {} directory levels are listed)",
        options.max_entries, options.max_depth
    )
}

/// One node of `directory_tree`'s JSON, its members in the order clients expect.
#[derive(serde::Serialize)]
struct Node {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<Vec<Node>>,
}

/// Builds the nested tree from walk entries in depth-first pre-order (`a`, `a/b`, `a/b/c`...).
fn build_tree<'a>(entries: impl Iterator<Item = (&'a str, bool)>) -> Vec<Node> {
    // The open directories from the top: each one's relative path and its children so far.
    let mut stack: Vec<(String, Vec<Node>)> = vec![(String::new(), Vec::new())];
    let close = |stack: &mut Vec<(String, Vec<Node>)>| {
        let (_, children) = stack.pop().expect("a directory below the top is open");
        let parent = stack.last_mut().expect("the top stays open");
        if let Some(node) = parent.1.last_mut() {
            node.children = Some(children);
        }
    };
    for (rel, is_dir) in entries {
        // Close directories this entry is not inside.
        while stack.len() > 1 {
            let prefix = &stack.last().expect("checked").0;
            if rel.len() > prefix.len()
                && rel.starts_with(prefix.as_str())
                && rel.as_bytes()[prefix.len()] == b'/'
            {
                break;
            }
            close(&mut stack);
        }
        let name = rel.rsplit('/').next().unwrap_or(rel).to_string();
        let node = Node {
            name,
            kind: if is_dir { "directory" } else { "file" },
            children: is_dir.then(Vec::new),
        };
        stack.last_mut().expect("the top stays open").1.push(node);
        if is_dir {
            stack.push((rel.to_string(), Vec::new()));
        }
    }
    while stack.len() > 1 {
        close(&mut stack);
    }
    stack.pop().map(|(_, top)| top).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_nest_preorder_entries() {
        let entries = [("a", true), ("a/b", false), ("a/c", true), ("d", false)];
        let tree = build_tree(entries.into_iter());
        let json = serde_json::to_value(&tree).unwrap();
        assert_eq!(
            json,
            json!([
                { "name": "a", "type": "directory", "children": [
                    { "name": "b", "type": "file" },
                    { "name": "c", "type": "directory", "children": [] }
                ] },
                { "name": "d", "type": "file" }
            ])
        );
    }
}
