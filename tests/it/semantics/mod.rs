//! Behaviour and error kinds of every operation (docs/DESIGN.md §2) on ordinary, non-hostile trees,
//! and the generated-image artifact helpers written through the trait.

use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{SECRET, env, err_kind};
use capfs::artifact::{image_generation_artifact_path, save_image_generation_result};
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ReadDirectoryEntry, RemoveOptions,
    RenameOptions,
};

mod reads;
mod tree_changes;
mod writes;

const RECURSIVE: CopyOptions = CopyOptions::new().with_recursive(true);

const FLAT: CopyOptions = CopyOptions::new().with_recursive(false);

const NO_FORCE: RemoveOptions = RemoveOptions::new().with_recursive(false).with_force(false);

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn is_link(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

fn exists(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn names(entries: &[ReadDirectoryEntry]) -> Vec<&str> {
    let mut names: Vec<&str> = entries.iter().map(|e| e.file_name.as_str()).collect();
    names.sort_unstable();
    names
}
