//! Generated-image artifacts: where an image produced by a tool call is stored, and how it is
//! written (through an [`ExecutorFileSystem`], so it is confined like every other write).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::file_system::{CreateDirectoryOptions, ExecutorFileSystem, FileSystemResult};
use crate::path::AbsolutePathBuf;

/// The file name used when an id sanitises to nothing.
const EMPTY_ID_REPLACEMENT: &str = "generated_image";

/// Keeps ASCII letters, digits, `-` and `_`; replaces every other char with `_`; maps an empty
/// input to `generated_image`. The result is always one safe path component.
///
/// ```
/// assert_eq!(capfs::artifact::sanitize("../x y"), "___x_y");
/// assert_eq!(capfs::artifact::sanitize(""), "generated_image");
/// ```
pub fn sanitize(id: &str) -> String {
    if id.is_empty() {
        return EMPTY_ID_REPLACEMENT.to_string();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `home/generated_images/<sanitize(session_id)>/<sanitize(call_id)>.png`.
///
/// ```
/// let home = capfs::AbsolutePathBuf::try_from("/home/agent").unwrap();
/// let path = capfs::artifact::image_generation_artifact_path(&home, "s/1", "..");
/// assert_eq!(path.to_string(), "/home/agent/generated_images/s_1/__.png");
/// ```
pub fn image_generation_artifact_path(
    home: &AbsolutePathBuf,
    session_id: &str,
    call_id: &str,
) -> AbsolutePathBuf {
    let file_name = format!("{}.png", sanitize(call_id));
    home.join("generated_images")
        .and_then(|p| p.join(sanitize(session_id)))
        .and_then(|p| p.join(file_name))
        .expect("sanitised components contain no NUL, slash or dot-only name")
}

/// Decodes `result` (standard base64, surrounding whitespace ignored) and writes it to
/// [`image_generation_artifact_path`], creating the parent directories. Returns the path written.
///
/// # Errors
///
/// `InvalidInput` when `result` is not standard, padded base64 (data URLs and the URL-safe
/// alphabet are refused); otherwise whatever `create_directory` or `write_file` returns.
pub async fn save_image_generation_result(
    fs: &dyn ExecutorFileSystem,
    home: &AbsolutePathBuf,
    session_id: &str,
    call_id: &str,
    result: &str,
) -> FileSystemResult<AbsolutePathBuf> {
    let bytes = STANDARD
        .decode(result.trim())
        .map_err(|e| crate::error::artifact_not_base64(&e))?;
    let path = image_generation_artifact_path(home, session_id, call_id);
    if let Some(parent) = path.parent() {
        fs.create_directory(&parent, CreateDirectoryOptions { recursive: true })
            .await?;
    }
    fs.write_file(&path, bytes).await?;
    Ok(path)
}
