//! Arbitrary ids (and home directory) for the generated-image artifact path.
//!
//! Oracle: `sanitize` output is non-empty, only `[A-Za-z0-9_-]`, idempotent and as long in chars
//! as its input (or `generated_image` for empty input); the artifact path is exactly
//! `home/generated_images/<sanitize(session)>/<sanitize(call)>.png`: two normal components below
//! `home/generated_images`, whatever the ids hold (`..`, `/`, NUL, unicode).

#![no_main]

use std::path::{Component, Path};

use arbitrary::Arbitrary;
use capfs::AbsolutePathBuf;
use capfs::artifact::{image_generation_artifact_path, sanitize};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    home: String,
    session_id: String,
    call_id: String,
}

fn check_sanitize(id: &str) -> String {
    let out = sanitize(id);
    assert!(!out.is_empty(), "{id:?}");
    assert!(
        out.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{id:?} -> {out:?}"
    );
    assert_eq!(sanitize(&out), out, "not idempotent on {id:?}");
    if id.is_empty() {
        assert_eq!(out, "generated_image");
    } else {
        assert_eq!(out.chars().count(), id.chars().count(), "{id:?} -> {out:?}");
    }
    out
}

fuzz_target!(|input: Input| {
    let session = check_sanitize(&input.session_id);
    let call = check_sanitize(&input.call_id);
    let home = AbsolutePathBuf::new(format!("/{}", input.home))
        .unwrap_or_else(|_| AbsolutePathBuf::new("/home/agent").expect("fixed home"));
    let path = image_generation_artifact_path(&home, &input.session_id, &input.call_id);
    let images = home.join("generated_images").expect("fixed name");
    let rel = path
        .strip_prefix(&images)
        .unwrap_or_else(|| panic!("{path:?} is not under {images:?}"));
    let parts: Vec<Component<'_>> = rel.components().collect();
    let file_name = format!("{call}.png");
    assert_eq!(
        parts,
        [
            Component::Normal(session.as_ref()),
            Component::Normal(file_name.as_ref())
        ],
        "{input:?} -> {path:?}"
    );
    assert_eq!(
        path.as_path(),
        images.as_path().join(Path::new(&session)).join(&file_name)
    );
});
