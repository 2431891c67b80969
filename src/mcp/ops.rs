//! The tools themselves: arguments in, text out, every file system call through the backend.
//! The read tools are in `reads.rs`, the listing tools in `listing.rs`; this file dispatches
//! to them all and holds the rest.

use rmcp::model::ContentBlock;
use serde::Deserialize;
use serde_json::{Value, json};

use super::call::{Output, PathArgs, ToolResult, Tools, args, at_path};
use super::text;
use capfs::{CreateDirectoryOptions, RenameOptions};

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
            "size: {}\ncreated: {}\nmodified: {}\naccessed: {}\nisDirectory: {}\nisFile: {}\n\
             permissions: {:03o}",
            m.size,
            text::format_date(m.created_at_ms),
            text::format_date(m.modified_at_ms),
            text::format_date(m.accessed_at_ms),
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
