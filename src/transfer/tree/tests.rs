//! The plan of a local tree: its bounds, and how it names a source the sandbox cannot take.

use super::*;
use crate::fail::EXIT_NOT_FOUND;

/// `top/a`, `top/b/c`, `top/b/d/e`: five entries, directories one and two levels down.
fn small_tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("top");
    std::fs::create_dir_all(top.join("b/d")).unwrap();
    for file in ["a", "b/c", "b/d/e"] {
        std::fs::write(top.join(file), file).unwrap();
    }
    (dir, top)
}

async fn plan_local(source: &Path, limits: Limits) -> Result<Vec<Node>, Failure> {
    let (fs, top) = open_local(source)?;
    plan(
        &fs,
        &top,
        0o755,
        Side::Local(source),
        limits,
        &mut Vec::new(),
    )
    .await
}

#[tokio::test]
async fn a_local_tree_past_a_bound_fails_naming_the_bound_and_the_source() {
    let (_dir, top) = small_tree();
    let shown = quote(&top.to_string_lossy());
    let fits = Limits {
        depth: 3,
        entries: 6,
    };
    assert_eq!(plan_local(&top, fits).await.unwrap().len(), 6);
    let many = Limits { entries: 5, ..fits };
    let err = plan_local(&top, many).await.err().unwrap();
    assert_eq!(
        err.message,
        format!("{shown}: the tree holds more than 5 entries; put -r copies at most that many")
    );
    assert_eq!(err.status, EXIT_FAILURE);
    let deep = Limits { depth: 2, ..fits };
    let err = plan_local(&top, deep).await.err().unwrap();
    assert_eq!(
        err.message,
        format!("{shown}: the tree is more than 2 levels deep; put -r copies no deeper")
    );
}

#[tokio::test]
async fn a_source_the_sandbox_cannot_take_as_its_root_is_named_as_given() {
    let (_dir, top) = small_tree();
    for (source, reason, status) in [
        (top.join("a"), "Not a directory", EXIT_FAILURE),
        (
            top.join("gone"),
            "No such file or directory",
            EXIT_NOT_FOUND,
        ),
    ] {
        let err = plan_local(&source, TREE_LIMITS).await.err().unwrap();
        let shown = quote(&source.to_string_lossy());
        let message = format!("cannot read local directory {shown}: {reason}");
        assert_eq!((err.message, err.status), (message, status));
    }
}

/// `/` is a root like any other: walked through the sandbox, its entries named `/x`.
#[tokio::test]
async fn the_host_root_as_a_source_is_walked_and_named_as_itself() {
    let slash = Path::new("/");
    let (_, top) = open_local(slash).unwrap();
    assert_eq!(top.as_path(), slash);
    assert_eq!(Side::Local(slash).show(&top, Path::new("etc")), "/etc");
    let shallow = Limits {
        depth: 1,
        entries: TREE_LIMITS.entries,
    };
    let err = plan_local(slash, shallow).await.err().unwrap();
    assert_eq!(
        err.message,
        "'/': the tree is more than 1 levels deep; put -r copies no deeper"
    );
}
