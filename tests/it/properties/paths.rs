//! Properties of `AbsolutePathBuf` and root matching.

use super::*;

/// Nested roots, a sibling sharing a string prefix (`rx`, `r/subx`), and an unrelated one.
const ROOT_NAMES: [&str; 6] = ["r", "r/sub", "r/sub/deep", "rx", "r/subx", "other"];

struct Roots {
    _dir: tempfile::TempDir,
    /// Canonical paths of [`ROOT_NAMES`], in order.
    paths: Vec<PathBuf>,
}

fn roots_fixture() -> &'static Roots {
    static ROOTS: OnceLock<Roots> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths = ROOT_NAMES
            .iter()
            .map(|name| {
                let path = dir.path().join(name);
                std::fs::create_dir_all(&path).expect("root dir");
                path.canonicalize().expect("canonical")
            })
            .collect();
        Roots { _dir: dir, paths }
    })
}

/// A path string that starts at one of the roots (or at `/`) and goes on with hostile parts.
fn path_near_roots() -> impl Strategy<Value = String> {
    (0..ROOT_NAMES.len() + 2, path_string()).prop_map(|(base, rest)| {
        let roots = roots_fixture();
        let base = match base {
            i if i < roots.paths.len() => roots.paths[i].to_str().expect("utf-8").to_string(),
            i if i == roots.paths.len() => roots.paths[0]
                .parent()
                .and_then(Path::to_str)
                .expect("parent")
                .to_string(),
            _ => String::new(),
        };
        format!("{base}/{rest}")
    })
}

proptest! {
    #![proptest_config(Config { cases: cases(256), ..Config::default() })]

    #[test]
    fn normalisation_is_idempotent_absolute_and_clean(input in path_string()) {
        match AbsolutePathBuf::try_from(input.as_str()) {
            Err(e) => {
                prop_assert!(!input.starts_with('/') || input.contains('\0'), "{input:?}: {e}");
                prop_assert_eq!(e.kind(), ErrorKind::InvalidInput);
            }
            Ok(path) => {
                prop_assert!(input.starts_with('/') && !input.contains('\0'), "{:?}", input);
                let text = path.as_path().to_str().expect("utf-8 in, utf-8 out");
                prop_assert_eq!(text, reference_normalise(&input));
                prop_assert!(path.as_path().is_absolute());
                prop_assert!(!text.contains('\0'));
                let below_root: Vec<_> = path.as_path().components().skip(1).collect();
                prop_assert!(below_root.iter().all(|c| matches!(c, Component::Normal(_))));
                prop_assert_eq!(AbsolutePathBuf::new(path.as_path()).unwrap(), path.clone());
                prop_assert_eq!(AbsolutePathBuf::try_from(text).unwrap(), path);
            }
        }
    }

    #[test]
    fn root_matching_picks_the_longest_component_prefix(
        mask in 1u8..(1 << ROOT_NAMES.len()),
        input in path_near_roots(),
    ) {
        let roots = roots_fixture();
        let mut sandbox = Sandbox::new();
        for (i, path) in roots.paths.iter().enumerate() {
            if mask & (1 << i) != 0 {
                sandbox = sandbox.with_root(path, Access::ReadWrite).unwrap();
            }
        }
        let Ok(path) = AbsolutePathBuf::try_from(input.as_str()) else {
            prop_assert!(input.contains('\0'));
            return Ok(());
        };
        let wanted: Vec<Component<'_>> = path.as_path().components().collect();
        let expected = sandbox
            .roots()
            .iter()
            .filter(|r| wanted.starts_with(&r.path().as_path().components().collect::<Vec<_>>()))
            .max_by_key(|r| r.path().as_path().components().count());
        match (sandbox.root_for(&path), expected) {
            (None, None) => {}
            (Some((root, rel)), Some(expected)) => {
                prop_assert_eq!(root.path(), expected.path());
                prop_assert!(only_normal_components(rel), "{:?} -> {:?}", path, rel);
                prop_assert!(!rel.starts_with(".."));
                let rejoined = AbsolutePathBuf::new(root.path().as_path().join(rel)).unwrap();
                prop_assert_eq!(rejoined, path);
            }
            (got, expected) => {
                prop_assert!(false, "{:?}: got {:?}, expected {:?}", path, got, expected)
            }
        }
    }

    #[test]
    fn a_path_under_no_root_is_permission_denied(input in path_near_roots()) {
        let roots = roots_fixture();
        // Only `r/sub` is a root here, so its parent, siblings and `/` are outside.
        let fs = LocalFileSystem::new(
            Sandbox::new().with_root(&roots.paths[1], Access::ReadWrite).unwrap(),
        );
        let Ok(path) = AbsolutePathBuf::try_from(input.as_str()) else {
            return Ok(());
        };
        if path.as_path().starts_with(&roots.paths[1]) {
            // Inside the root: another property's business (most generated paths are not).
            return Ok(());
        }
        prop_assert!(fs.sandbox().root_for(&path).is_none());
        let rt = runtime();
        let kinds = [
            rt.block_on(fs.get_metadata(&path)).map(drop),
            rt.block_on(fs.read_file(&path)).map(drop),
            rt.block_on(fs.read_directory(&path)).map(drop),
        ];
        for result in kinds {
            prop_assert_eq!(result.map_err(|e| e.kind()), Err(ErrorKind::PermissionDenied));
        }
        // Mutations only where a broken sandbox could do no harm: inside the temporary dir.
        if path.as_path().starts_with(roots.paths[0].parent().unwrap()) {
            let results = [
                rt.block_on(fs.write_file(&path, b"x".to_vec())),
                rt.block_on(fs.create_directory(&path, CreateDirectoryOptions::default().with_recursive(true))),
                rt.block_on(fs.remove(&path, RemoveOptions::default())),
            ];
            for result in results {
                prop_assert_eq!(result.map_err(|e| e.kind()), Err(ErrorKind::PermissionDenied));
            }
        }
    }
}
