//! The tool list: names, input schemas (with their defaults), output schemas and annotations as
//! MCP clients configured for the reference filesystem server expect them.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// Every tool, in the order `tools/list` gives them.
pub(crate) fn all() -> Vec<Tool> {
    let head_tail = json!({
        "path": { "type": "string" },
        "tail": { "type": "number", "description": "Return only the last N lines of the file" },
        "head": { "type": "number", "description": "Return only the first N lines of the file" },
    });
    let path_only = json!({ "path": { "type": "string" } });
    let excludes = json!({ "type": "array", "items": { "type": "string" }, "default": [] });
    vec![
        tool(
            "read_file",
            "Read File (Deprecated)",
            "Read a whole file as UTF-8 text. Deprecated: call read_text_file.",
            head_tail.clone(),
            &["path"],
            Hint::Read,
        ),
        tool(
            "read_text_file",
            "Read Text File",
            "Read a file as UTF-8 text (invalid bytes become U+FFFD). Give 'head' for only the \
             first N lines or 'tail' for only the last N lines, not both. Files above the \
             server's read limit are refused. Paths must lie inside the allowed directories.",
            head_tail,
            &["path"],
            Hint::Read,
        ),
        media_tool(),
        tool(
            "read_multiple_files",
            "Read Multiple Files",
            "Read several files at once; each result is labelled with its path, and a file that \
             cannot be read reports its error without failing the others.",
            json!({ "paths": {
                "type": "array",
                "items": { "type": "string" },
                "minItems": 1,
                "description": "The paths of the files to read, each inside the allowed directories."
            } }),
            &["paths"],
            Hint::Read,
        ),
        tool(
            "write_file",
            "Write File",
            "Create a file or replace its whole contents with the given text. The file is \
             replaced atomically: readers see the old contents or the new, never a mix.",
            json!({ "path": { "type": "string" }, "content": { "type": "string" } }),
            &["path", "content"],
            Hint::Write {
                destructive: true,
                idempotent: true,
            },
        ),
        tool(
            "edit_file",
            "Edit File",
            "Replace text in a file: each edit's oldText is found (exactly, else line by line \
             ignoring indentation) and replaced by newText, in order. Returns a git-style unified \
             diff; with dryRun the file is left as it is.",
            json!({
                "path": { "type": "string" },
                "edits": { "type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "oldText": { "type": "string", "description": "The text to find" },
                        "newText": { "type": "string", "description": "The text to put in its place" }
                    },
                    "required": ["oldText", "newText"]
                } },
                "dryRun": {
                    "type": "boolean",
                    "default": false,
                    "description": "Only show the diff, change nothing"
                }
            }),
            &["path", "edits"],
            Hint::Write {
                destructive: true,
                idempotent: false,
            },
        ),
        tool(
            "create_directory",
            "Create Directory",
            "Create a directory and any missing parents; an existing directory is not an error.",
            path_only.clone(),
            &["path"],
            Hint::Write {
                destructive: false,
                idempotent: true,
            },
        ),
        tool(
            "list_directory",
            "List Directory",
            "List a directory's entries, one per line, each marked [DIR] or [FILE]. A listing \
             longer than one reply carries is cut short, with a note of how many entries were \
             left out.",
            path_only.clone(),
            &["path"],
            Hint::Read,
        ),
        tool(
            "list_directory_with_sizes",
            "List Directory with Sizes",
            "List a directory's entries with their sizes, sorted by name or by size, followed by \
             the totals (of every entry). A listing longer than one reply carries is cut short, \
             with a note of how many entries were left out.",
            json!({
                "path": { "type": "string" },
                "sortBy": {
                    "type": "string",
                    "enum": ["name", "size"],
                    "default": "name",
                    "description": "Sort by name or by size (largest first)"
                }
            }),
            &["path"],
            Hint::Read,
        ),
        tool(
            "directory_tree",
            "Directory Tree",
            "The tree below a directory as indented JSON: each entry has 'name' and 'type' (file \
             or directory), directories a 'children' array. Symlinks are never followed. A tree \
             past 100,000 entries, 128 levels or what one reply carries (8 MiB) is cut short: \
             the JSON still parses and holds the first entries in depth-first order, and a \
             second content block says how many entries were left out and how to narrow the \
             request (a subdirectory, excludePatterns).",
            json!({ "path": { "type": "string" }, "excludePatterns": excludes.clone() }),
            &["path"],
            Hint::Read,
        ),
        tool(
            "move_file",
            "Move File",
            "Move or rename a file or directory. Fails when the destination exists.",
            json!({ "source": { "type": "string" }, "destination": { "type": "string" } }),
            &["source", "destination"],
            Hint::Write {
                destructive: true,
                idempotent: false,
            },
        ),
        tool(
            "search_files",
            "Search Files",
            "Find files and directories below a path whose path relative to it matches a glob \
             ('*.rs' at the top, '**/*.rs' at any depth); returns their full paths. Symlinks are \
             listed, never followed. Results past 100,000 entries, 128 levels or what one reply \
             carries (8 MiB) are cut short, with a second content block saying how many were \
             left out and how to narrow the search.",
            json!({
                "path": { "type": "string" },
                "pattern": { "type": "string" },
                "excludePatterns": excludes
            }),
            &["path", "pattern"],
            Hint::Read,
        ),
        tool(
            "get_file_info",
            "Get File Info",
            "Show a file's or directory's size, times (created, modified, accessed), type and \
             permissions without reading it.",
            path_only,
            &["path"],
            Hint::Read,
        ),
        tool(
            "list_allowed_directories",
            "List Allowed Directories",
            "The directories this server may reach (everything below them too); read-only ones \
             are marked.",
            json!({}),
            &[],
            Hint::Read,
        ),
    ]
}

/// What a tool does to the file system, as annotations say it.
enum Hint {
    Read,
    Write { destructive: bool, idempotent: bool },
}

fn object_schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut schema = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("built as an object"),
    }
}

fn tool(
    name: &'static str,
    title: &str,
    description: &'static str,
    properties: Value,
    required: &[&str],
    hint: Hint,
) -> Tool {
    let annotations = match hint {
        Hint::Read => ToolAnnotations::from_raw(None, Some(true), None, None, Some(false)),
        Hint::Write {
            destructive,
            idempotent,
        } => ToolAnnotations::from_raw(
            None,
            Some(false),
            Some(destructive),
            Some(idempotent),
            Some(false),
        ),
    };
    let mut tool = Tool::default();
    tool.name = name.into();
    tool.title = Some(title.to_string());
    tool.description = Some(description.into());
    tool.input_schema = object_schema(properties, required);
    tool.output_schema = Some(object_schema(
        json!({ "content": { "type": "string" } }),
        &["content"],
    ));
    tool.annotations = Some(annotations);
    tool
}

fn media_tool() -> Tool {
    let mut t = tool(
        "read_media_file",
        "Read Media File",
        "Read a file as base64 with a MIME type from its extension: images and audio as image \
         or audio content, anything else as an embedded resource.",
        json!({ "path": { "type": "string" } }),
        &["path"],
        Hint::Read,
    );
    let item = json!({ "anyOf": [
        {
            "type": "object",
            "properties": {
                "type": { "type": "string", "enum": ["image", "audio"] },
                "data": { "type": "string" },
                "mimeType": { "type": "string" }
            },
            "required": ["type", "data", "mimeType"]
        },
        {
            "type": "object",
            "properties": {
                "type": { "type": "string", "const": "resource" },
                "resource": {
                    "type": "object",
                    "properties": {
                        "uri": { "type": "string" },
                        "mimeType": { "type": "string" },
                        "blob": { "type": "string" }
                    },
                    "required": ["uri", "blob"]
                }
            },
            "required": ["type", "resource"]
        }
    ] });
    t.output_schema = Some(object_schema(
        json!({ "content": { "type": "array", "items": item } }),
        &["content"],
    ));
    t
}
