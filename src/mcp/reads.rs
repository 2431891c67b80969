//! The read tools (`read_text_file`, `read_media_file`, `read_multiple_files`) under one reply
//! budget: a tool call's whole reply, `content` and `structuredContent` together, stays under
//! [`REPLY_LIMIT`], and no file is read further than the reply can carry.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{ContentBlock, ResourceContents};
use serde::Deserialize;
use serde_json::json;

use super::bounded::{self, Stop};
use super::call::{Output, PathArgs, ToolResult, Tools, at_path};
use super::text;
use capfs::AbsolutePathBuf;

/// The largest reply line capfs mcp writes: 8 MiB. The official TypeScript SDK's stdio client
/// closes the connection when its buffer passes 10 MiB (`STDIO_DEFAULT_MAX_BUFFER_SIZE`); the
/// margin leaves room for the start of the next message in the same read.
pub(crate) const REPLY_LIMIT: usize = 8 * 1024 * 1024;
/// Bytes of a reply kept for everything but the file: the JSON-RPC envelope, member names,
/// paths and MIME types.
const ENVELOPE: usize = 16 * 1024;
/// Most bytes of text a reply carries: it is sent twice (`content` and `structuredContent`).
pub(crate) const TEXT_BUDGET: usize = (REPLY_LIMIT - ENVELOPE) / 2;
/// Most bytes of a media file a reply carries: base64 (4 bytes per 3), sent twice.
const MEDIA_BUDGET: usize = (REPLY_LIMIT - ENVELOPE) / 8 * 3;
const _: () = assert!(2 * TEXT_BUDGET + ENVELOPE <= REPLY_LIMIT);
const _: () = assert!(2 * MEDIA_BUDGET.div_ceil(3) * 4 + ENVELOPE <= REPLY_LIMIT);

#[derive(Deserialize)]
pub(super) struct ReadTextArgs {
    path: String,
    head: Option<f64>,
    tail: Option<f64>,
}

#[derive(Deserialize)]
pub(super) struct PathsArgs {
    paths: Vec<String>,
}

/// A line count given as a JSON number: positive ones count, others mean "not given".
fn line_count(n: Option<f64>) -> Option<usize> {
    n.filter(|n| *n >= 1.0).map(|n| n as usize)
}

/// The error of a text that does not fit in the reply.
fn too_large(path: &AbsolutePathBuf) -> String {
    format!(
        "{path}: file is too large to read: a reply holds at most {TEXT_BUDGET} bytes of text \
         ({REPLY_LIMIT} bytes in all, the text sent twice); read part of it with head or tail"
    )
}

/// Bytes `s` takes as a JSON string, quotes included, as serde_json writes it.
pub(crate) fn json_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

fn mime_type(name: &str) -> &'static str {
    let extension = std::path::Path::new(name)
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

impl Tools<'_> {
    /// `budget`, or the backend's read limit when that is lower.
    fn bound(&self, budget: usize) -> usize {
        self.fs.read_file_limit().map_or(budget, |limit| {
            budget.min(usize::try_from(limit).unwrap_or(usize::MAX))
        })
    }

    /// The error of a file over `budget`: the backend's read limit when that is what stopped
    /// the read, else `over_budget`.
    fn over(&self, path: &AbsolutePathBuf, budget: usize, over_budget: String) -> String {
        match self.fs.read_file_limit() {
            Some(limit) if (limit as u128) < budget as u128 => {
                format!("{path}: file is too large to read: limit is {limit} bytes")
            }
            _ => over_budget,
        }
    }

    /// The text of `path` (its first or last lines with `head`/`tail`), read no further than
    /// `max` bytes of it (and for `head`/`tail` no further than the lines returned).
    async fn text_of(
        &self,
        path: &AbsolutePathBuf,
        head: Option<usize>,
        tail: Option<usize>,
        max: usize,
    ) -> Result<String, Stop> {
        let max = self.bound(max);
        let read = match (head, tail) {
            (_, Some(n)) => bounded::last_lines(self.fs, path, n, max).await,
            (Some(n), _) => bounded::first_lines(self.fs, path, n, max).await,
            _ => bounded::whole(self.fs, path, max).await,
        };
        let data = read?;
        let content = String::from_utf8_lossy(&data);
        Ok(match (head, tail) {
            (_, Some(n)) => text::tail(&content, n),
            (Some(n), _) => text::head(&content, n),
            _ => content.into_owned(),
        })
    }

    pub(super) async fn read_text(&self, a: ReadTextArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let (head, tail) = (line_count(a.head), line_count(a.tail));
        if head.is_some() && tail.is_some() {
            return Err("Cannot specify both head and tail parameters simultaneously".into());
        }
        let content = match self.text_of(&path, head, tail, TEXT_BUDGET).await {
            Ok(content) => content,
            Err(Stop::Over) => return Err(self.over(&path, TEXT_BUDGET, too_large(&path))),
            Err(Stop::Failed(e)) => return Err(at_path(&path, e)),
        };
        // Escapes can make the JSON longer than the bytes read.
        if 2 * json_len(&content) > REPLY_LIMIT - ENVELOPE {
            return Err(too_large(&path));
        }
        Ok(Output::Text(content))
    }

    /// The name of the file `path` leads to, its symlinks followed (for its MIME type).
    async fn final_name(&self, path: &AbsolutePathBuf) -> AbsolutePathBuf {
        let mut current = path.clone();
        for _ in 0..40 {
            let is_link = self
                .fs
                .get_metadata(&current)
                .await
                .is_ok_and(|m| m.is_symlink);
            let target = match is_link {
                true => self.fs.read_link(&current).await.ok(),
                false => None,
            };
            let next = target.and_then(|t| match current.parent() {
                Some(parent) => parent.join(t).ok(),
                None => AbsolutePathBuf::new(t).ok(),
            });
            match next {
                Some(next) => current = next,
                None => break,
            }
        }
        current
    }

    pub(super) async fn read_media(&self, a: PathArgs) -> ToolResult {
        let path = self.resolve(&a.path)?;
        let data = match bounded::whole(self.fs, &path, self.bound(MEDIA_BUDGET)).await {
            Ok(data) => data,
            Err(Stop::Over) => {
                let over_budget = format!(
                    "{path}: file is too large to read: a reply holds at most {MEDIA_BUDGET} \
                     bytes of a media file ({REPLY_LIMIT} bytes in all, its base64 sent twice)"
                );
                return Err(self.over(&path, MEDIA_BUDGET, over_budget));
            }
            Err(Stop::Failed(e)) => return Err(at_path(&path, e)),
        };
        let mime = mime_type(&self.final_name(&path).await.to_string_lossy());
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

    /// Every file in order, under one budget: each is read at most as far as what is left of
    /// the reply, and one that does not fit is reported in its place.
    pub(super) async fn read_multiple(&self, a: PathsArgs) -> ToolResult {
        if a.paths.is_empty() {
            return Err("invalid arguments for tool read_multiple_files: paths is empty".into());
        }
        let mut left = REPLY_LIMIT - ENVELOPE;
        let mut parts: Vec<String> = Vec::with_capacity(a.paths.len());
        for p in &a.paths {
            // The separator before this part, and the part itself, are sent twice.
            let separator = if parts.is_empty() {
                0
            } else {
                2 * "\n---\n".len()
            };
            let room = left.saturating_sub(separator + 2 * (p.len() + 64)) / 2;
            let result = match self.resolve(p) {
                Ok(path) => match self.text_of(&path, None, None, room).await {
                    Ok(content) => Ok(content),
                    Err(Stop::Over) => Err(self.over(
                        &path,
                        room,
                        format!(
                            "{path}: file is too large to read: {room} bytes of the reply were \
                             left for it ({REPLY_LIMIT} bytes in all, for every file, the text \
                             sent twice); read it on its own, or part of it with head or tail"
                        ),
                    )),
                    Err(Stop::Failed(e)) => Err(at_path(&path, e)),
                },
                Err(e) => Err(e),
            };
            let mut part = match result {
                Ok(content) => format!("{p}:\n{content}\n"),
                Err(e) => format!("{p}: Error - {e}"),
            };
            let mut cost = separator + 2 * (json_len(&part) - 2);
            if cost > left {
                part = format!("{p}: Error - the reply has no room left for this file");
                cost = separator + 2 * (json_len(&part) - 2);
            }
            left = left.saturating_sub(cost);
            parts.push(part);
        }
        Ok(Output::Text(parts.join("\n---\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lengths_are_serde_json_s() {
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "\n\t\r\u{8}\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "é😀",
        ] {
            assert_eq!(
                json_len(s),
                serde_json::to_string(s).unwrap().len(),
                "{s:?}"
            );
        }
    }
}
