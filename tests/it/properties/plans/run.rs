//! Running a plan on both backends: every outcome confined, and the backends agreeing.

use super::*;

/// What an operation returned, in a form both backends can be compared by.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Data(Vec<u8>),
    Metadata {
        is_directory: bool,
        is_file: bool,
        is_symlink: bool,
        size: Option<u64>,
    },
    Entries(Vec<(String, bool, bool, bool)>),
    Failed(ErrorKind),
}

async fn apply(fs: &dyn ExecutorFileSystem, tree: &Tree, op: &Op) -> Outcome {
    let done =
        |r: std::io::Result<()>| r.map_or_else(|e| Outcome::Failed(e.kind()), |()| Outcome::Done);
    match op {
        Op::Read(p) => match fs.read_file(&tree.path(p)).await {
            Ok(data) => Outcome::Data(data),
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::Write(p, data) => done(fs.write_file(&tree.path(p), data.clone()).await),
        Op::CreateDirectory(p, recursive) => done(
            fs.create_directory(
                &tree.path(p),
                CreateDirectoryOptions::default().with_recursive(*recursive),
            )
            .await,
        ),
        Op::GetMetadata(p) => match fs.get_metadata(&tree.path(p)).await {
            Ok(m) => Outcome::Metadata {
                is_directory: m.is_directory,
                is_file: m.is_file,
                is_symlink: m.is_symlink,
                // A directory's size depends on the file system's history, not on its contents.
                size: (!m.is_directory).then_some(m.size),
            },
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::ReadDirectory(p) => match fs.read_directory(&tree.path(p)).await {
            Ok(entries) => {
                let mut entries: Vec<_> = entries
                    .into_iter()
                    .map(|e| (e.file_name, e.is_directory, e.is_file, e.is_symlink))
                    .collect();
                entries.sort();
                Outcome::Entries(entries)
            }
            Err(e) => Outcome::Failed(e.kind()),
        },
        Op::Remove(p, recursive, force) => done(
            fs.remove(
                &tree.path(p),
                RemoveOptions::default()
                    .with_recursive(*recursive)
                    .with_force(*force),
            )
            .await,
        ),
        Op::Copy(a, b, recursive) => done(
            fs.copy(
                &tree.path(a),
                &tree.path(b),
                CopyOptions::default().with_recursive(*recursive),
            )
            .await,
        ),
        Op::Rename(a, b, overwrite) => done(
            fs.rename(
                &tree.path(a),
                &tree.path(b),
                RenameOptions::default().with_overwrite(*overwrite),
            )
            .await,
        ),
    }
}

/// True when `path` is lexically outside the tree's root.
fn outside(tree: &Tree, spec: &OpPath) -> bool {
    let path = tree.path(spec);
    !path.as_path().starts_with(&tree.root) && !path.as_path().starts_with(tree.sibling_root())
}

/// The checks every outcome must pass whatever the backend: nothing read carries the canary's
/// token, and an operation on a path outside the root fails.
fn check_outcome(tree: &Tree, op: &Op, outcome: &Outcome) -> Result<(), TestCaseError> {
    if let Outcome::Data(data) = outcome {
        prop_assert!(
            !data.windows(CANARY_TOKEN.len()).any(|w| w == CANARY_TOKEN),
            "{:?} read the canary",
            op
        );
    }
    let single = match op {
        Op::Read(p)
        | Op::Write(p, _)
        | Op::CreateDirectory(p, _)
        | Op::GetMetadata(p)
        | Op::ReadDirectory(p)
        | Op::Remove(p, _, _) => Some(p),
        Op::Copy(..) | Op::Rename(..) => None,
    };
    match (single, op) {
        (Some(p), _) if outside(tree, p) => {
            prop_assert_eq!(
                outcome,
                &Outcome::Failed(ErrorKind::PermissionDenied),
                "{:?}",
                op
            )
        }
        (None, Op::Copy(a, b, _) | Op::Rename(a, b, _)) if outside(tree, a) || outside(tree, b) => {
            prop_assert!(
                matches!(outcome, Outcome::Failed(_)),
                "{:?} gave {:?}",
                op,
                outcome
            )
        }
        _ => {}
    }
    Ok(())
}

/// Round trips after a successful operation: what was written reads back, a created directory
/// is a directory.
async fn check_round_trip(
    fs: &dyn ExecutorFileSystem,
    tree: &Tree,
    op: &Op,
    outcome: &Outcome,
) -> Result<(), TestCaseError> {
    match (op, outcome) {
        (Op::Write(p, data), Outcome::Done) => {
            let read = fs.read_file(&tree.path(p)).await.map_err(|e| e.kind());
            prop_assert_eq!(read, Ok(data.clone()), "{:?} does not read back", op);
        }
        (Op::CreateDirectory(p, _), Outcome::Done) => {
            let meta = fs.get_metadata(&tree.path(p)).await.map_err(|e| e.kind());
            prop_assert!(
                meta.is_ok_and(|m| m.is_directory),
                "{:?} made no directory",
                op
            );
        }
        _ => {}
    }
    Ok(())
}

#[test]
fn operation_plans_stay_confined_and_backends_agree() {
    let rt = runtime();
    let local_top = tempfile::tempdir().expect("temp dir");
    let remote_top = tempfile::tempdir().expect("temp dir");
    let local_tree = Tree::create(local_top.path());
    let remote_tree = Tree::create(remote_top.path());
    let local = LocalFileSystem::new(
        Sandbox::new()
            .with_root(&local_tree.root, Access::ReadWrite)
            .and_then(|s| s.with_root(local_tree.read_only_root(), Access::ReadOnly))
            .and_then(|s| s.with_root(local_tree.sibling_root(), Access::ReadWrite))
            .expect("sandbox"),
    );
    // One server for the whole run, over the twin tree.
    let ro = remote_tree.read_only_root();
    let sibling = remote_tree.sibling_root();
    let args = [
        OsStr::new("--root"),
        remote_tree.root.as_os_str(),
        OsStr::new("--root"),
        sibling.as_os_str(),
        OsStr::new("--read-only"),
        ro.as_os_str(),
    ];
    let server = rt.block_on(crate::serve::ServerProcess::start_with(&args, &[]));
    let remote = rt
        .block_on(RemoteFileSystem::connect(
            &server.url,
            RemoteOptions::default(),
        ))
        .expect("connect");

    let config = Config {
        cases: cases(24),
        failure_persistence: None,
        ..Config::default()
    };
    let plan = (
        prop::collection::vec(entry(), 0..10),
        prop::collection::vec(op(), 1..=12),
    );
    let mut runner = TestRunner::new(config);
    let result = runner.run(&plan, |(entries, ops)| {
        local_tree.reset(&entries);
        remote_tree.reset(&entries);
        let local_canary = local_tree.canary();
        let remote_canary = remote_tree.canary();
        for (i, op) in ops.iter().enumerate() {
            let here = rt.block_on(apply(&local, &local_tree, op));
            let there = rt.block_on(apply(&remote, &remote_tree, op));
            check_outcome(&local_tree, op, &here)?;
            prop_assert_eq!(&here, &there, "op {} {:?}: local and remote differ", i, op);
            for (fs, tree) in [
                (&local as &dyn ExecutorFileSystem, &local_tree),
                (&remote, &remote_tree),
            ] {
                rt.block_on(check_round_trip(fs, tree, op, &here))?;
            }
            prop_assert_eq!(
                local_tree.canary(),
                local_canary.clone(),
                "op {} {:?} changed the canary",
                i,
                op
            );
            prop_assert_eq!(
                remote_tree.canary(),
                remote_canary.clone(),
                "op {} {:?} changed the canary (remote)",
                i,
                op
            );
            prop_assert_eq!(
                local_tree.contents(),
                remote_tree.contents(),
                "op {} {:?}: trees differ",
                i,
                op
            );
        }
        Ok(())
    });
    drop(server);
    if let Err(e) = result {
        panic!("{e}");
    }
}
