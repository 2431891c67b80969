//! The listing tools: `list_directory`, `list_directory_with_sizes`, `directory_tree` and
//! `search_files`, each a listing or one walk through the backend, cut to what one reply
//! carries (see `fit.rs`).

use serde::Deserialize;

use super::call::{PathArgs, ToolResult, Tools, at_path};
use super::fit::{Cut, LISTING_BUDGET, lines_fitting};
use super::glob;
use super::reads::json_len;
use super::text;
use super::tree;
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
        Ok(cut_lines(lines, LISTING_BUDGET, None, LIST_NARROWER))
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
        // The totals are of every entry, and always sent: the rows get what they leave.
        let totals = [
            String::new(),
            format!("Total: {files} files, {} directories", rows.len() - files),
            format!("Combined size: {}", text::format_size(total)),
        ];
        let room = LISTING_BUDGET.saturating_sub(json_len(&totals.join("\n")) + 2);
        let found = lines.len();
        lines.truncate(lines_fitting(&lines, room));
        let cut = Cut {
            walk: None,
            found,
            shown: lines.len(),
            narrow: LIST_NARROWER,
        };
        lines.extend(totals);
        Ok(cut.output(lines.join("\n")))
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
        let kept: Vec<(&str, bool)> = excludes
            .prune(&walk.entries)
            .iter()
            .map(|e| (e.path.as_str(), e.is_directory))
            .collect();
        // The note is a block of its own, so the tree's text stays JSON that parses.
        let (text, shown) = tree::text(&kept, LISTING_BUDGET);
        let cut = Cut {
            walk: walk.truncated.then_some(&options),
            found: kept.len(),
            shown,
            narrow: "ask for the tree of a subdirectory, or leave parts out with excludePatterns",
        };
        Ok(cut.output(text))
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
        let walk_cut = walk.truncated.then_some(&options);
        Ok(cut_lines(lines, LISTING_BUDGET, walk_cut, SEARCH_NARROWER))
    }
}

/// How to see the entries a listing left out.
const LIST_NARROWER: &str = "search_files with a pattern lists the rest";
const SEARCH_NARROWER: &str =
    "search a subdirectory, with a narrower pattern, or leave parts out with excludePatterns";

/// `lines`, one entry each, as many as fit in `room` bytes of a JSON string, with the note of
/// what was left out.
fn cut_lines(
    mut lines: Vec<String>,
    room: usize,
    walk: Option<&WalkOptions>,
    narrow: &str,
) -> super::call::Output {
    let found = lines.len();
    lines.truncate(lines_fitting(&lines, room));
    let cut = Cut {
        walk,
        found,
        shown: lines.len(),
        narrow,
    };
    cut.output(lines.join("\n"))
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
