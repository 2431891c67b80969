//! The listing tools: `list_directory`, `list_directory_with_sizes`, `directory_tree` and
//! `search_files`, each a listing or one walk through the backend.

use rmcp::model::ContentBlock;
use serde::Deserialize;
use serde_json::json;

use super::call::{Output, PathArgs, ToolResult, Tools, at_path};
use super::glob;
use super::text;
use capfs::{ReadDirectoryEntry, WalkEntry, WalkOptions};
use futures_util::future::join_all;

/// Deepest directory level `search_files` and `directory_tree` list.
pub(crate) const TREE_MAX_DEPTH: usize = 128;
/// Most entries `search_files` and `directory_tree` return.
pub(crate) const TREE_MAX_ENTRIES: usize = 100_000;

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(super) enum SortBy {
    #[default]
    Name,
    Size,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SizesArgs {
    path: String,
    #[serde(default)]
    sort_by: SortBy,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TreeArgs {
    path: String,
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchArgs {
    path: String,
    pattern: String,
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

impl Tools<'_> {
    pub(super) async fn list(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let entries = listable(
            self.fs
                .read_directory(&path)
                .await
                .map_err(|e| at_path(&path, e))?,
        );
        let lines: Vec<String> = entries
            .iter()
            .map(|e| {
                let tag = if e.is_directory { "[DIR]" } else { "[FILE]" };
                format!("{tag} {}", e.file_name)
            })
            .collect();
        Ok(Output::Text(lines.join("\n")))
    }

    pub(super) async fn list_with_sizes(&self, a: SizesArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let entries = listable(
            self.fs
                .read_directory(&path)
                .await
                .map_err(|e| at_path(&path, e))?,
        );
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

    pub(super) async fn tree(&self, a: TreeArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        // As the reference: a pattern without `*` also names an entry at any depth, and
        // everything below it.
        let mut raw = Vec::new();
        for p in a.exclude_patterns {
            if !p.contains('*') {
                raw.push(format!("**/{p}"));
                raw.push(format!("**/{p}/**"));
            }
            raw.push(p);
        }
        let excludes = Excludes::new(&raw)?;
        let options = WalkOptions::default()
            .with_max_depth(TREE_MAX_DEPTH)
            .with_max_entries(TREE_MAX_ENTRIES)
            .with_exclude(excludes.walk.clone());
        let walk = self
            .fs
            .walk(&path, &options)
            .await
            .map_err(|e| at_path(&path, e))?;
        let kept = excludes.prune(&walk.entries);
        let tree = build_tree(kept.iter().map(|e| (e.path.as_str(), e.is_directory)));
        let text =
            serde_json::to_string_pretty(&tree).expect("a tree of strings always serializes");
        // The note is a block of its own, so the tree's text stays JSON that parses.
        match walk.truncated {
            false => Ok(Output::Text(text)),
            true => Ok(with_note(text, truncation_note(&options))),
        }
    }

    pub(super) async fn search(&self, a: SearchArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let pattern = glob::parse(&a.pattern)?;
        let excludes = Excludes::new(&a.exclude_patterns)?;
        // The walk matches what globset can say; a negated pattern, or excludes that must
        // prune by negation, are matched here on every entry the walk lists.
        let walk_pattern = match excludes.here.is_empty() {
            true => pattern.walk_glob(),
            false => None,
        };
        let here = match walk_pattern {
            Some(_) => None,
            None => Some(pattern.matcher()),
        };
        let options = WalkOptions::default()
            .with_max_depth(TREE_MAX_DEPTH)
            .with_max_entries(TREE_MAX_ENTRIES)
            .with_pattern(walk_pattern)
            .with_exclude(excludes.walk.clone());
        let walk = self
            .fs
            .walk(&path, &options)
            .await
            .map_err(|e| at_path(&path, e))?;
        let base = path.to_string_lossy();
        let base = base.trim_end_matches('/');
        let mut lines: Vec<String> = excludes
            .prune(&walk.entries)
            .into_iter()
            .filter(|e| here.as_ref().is_none_or(|m| m.is_match(&e.path)))
            .map(|e| format!("{base}/{}", e.path))
            .collect();
        if lines.is_empty() {
            lines.push("No matches found".to_string());
        }
        // The note is a block of its own: every line of the first is a path.
        match walk.truncated {
            false => Ok(Output::Text(lines.join("\n"))),
            true => Ok(with_note(lines.join("\n"), truncation_note(&options))),
        }
    }
}

/// Exclude patterns: the globs the walk prunes with, and those pruned here (negated, or
/// beyond globset).
struct Excludes {
    walk: Vec<String>,
    here: Vec<glob::Matcher>,
}

impl Excludes {
    fn new(patterns: &[String]) -> Result<Self, String> {
        let mut excludes = Self {
            walk: Vec::new(),
            here: Vec::new(),
        };
        for p in patterns {
            let parsed = glob::parse(p)?;
            if parsed.negated || !parsed.walkable {
                excludes.here.push(parsed.matcher());
            } else {
                excludes.walk.extend(parsed.globs);
            }
        }
        Ok(excludes)
    }

    /// The entries (in the walk's pre-order) left once every entry a negated pattern
    /// excludes is taken out with everything below it.
    fn prune<'a>(&self, entries: &'a [WalkEntry]) -> Vec<&'a WalkEntry> {
        let mut kept = Vec::with_capacity(entries.len());
        let mut cut: Option<&str> = None;
        for entry in entries {
            if let Some(dir) = cut {
                let below = entry.path.len() > dir.len()
                    && entry.path.starts_with(dir)
                    && entry.path.as_bytes()[dir.len()] == b'/';
                if below {
                    continue;
                }
                cut = None;
            }
            if self.here.iter().any(|m| m.is_match(&entry.path)) {
                cut = Some(&entry.path);
                continue;
            }
            kept.push(entry);
        }
        kept
    }
}

/// The entries a listing shows: those whose names are UTF-8. A lossy rendering of another name
/// would name a different entry or none (remote listings leave them out too).
fn listable(entries: Vec<ReadDirectoryEntry>) -> Vec<ReadDirectoryEntry> {
    entries.into_iter().filter(|e| !e.lossy_name).collect()
}

/// A result whose first block is `text` (mirrored in `structuredContent.content`) and whose
/// second says how it was cut short.
fn with_note(text: String, note: String) -> Output {
    let structured = json!({ "content": text });
    Output::Blocks {
        blocks: vec![ContentBlock::text(text), ContentBlock::text(note)],
        structured,
    }
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
