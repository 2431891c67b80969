//! Every operation shape beside an attacker exchanging names with a root, and overwriting
//! renames.

use super::*;
use test_case::test_case;

/// The repeated operation of each race.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// `rename ws/d -> ws/innerlink/x`: into the inner root through a link.
    RenameIntoInner,
    /// `rename ws/d -> ws/sub/m`.
    RenameIntoSub,
    /// `remove -r ws/d`.
    RemoveRecursive,
    /// `remove ws/d`.
    Remove,
    /// `rename ws/s -> ws/d` with `overwrite`.
    RenameOver,
}

impl Shape {
    /// Creates what the operation works on, if it is missing.
    fn prepare(self, ws: &Path) {
        let _ = std::fs::create_dir(ws.join("d"));
        if let Shape::RenameOver = self {
            let _ = std::fs::create_dir(ws.join("s"));
        }
    }

    async fn run(self, setup: &Setup) -> bool {
        let fs = &setup.fs;
        let d = setup.p("d");
        let result = match self {
            Shape::RenameIntoInner => {
                fs.rename(&d, &setup.p("innerlink/x"), RenameOptions::default())
                    .await
            }
            Shape::RenameIntoSub => {
                fs.rename(&d, &setup.p("sub/m"), RenameOptions::default())
                    .await
            }
            Shape::RemoveRecursive | Shape::Remove => {
                let options = RemoveOptions::default()
                    .with_recursive(matches!(self, Shape::RemoveRecursive))
                    .with_force(false);
                fs.remove(&d, options).await
            }
            Shape::RenameOver => {
                fs.rename(
                    &setup.p("s"),
                    &d,
                    RenameOptions::default().with_overwrite(true),
                )
                .await
            }
        };
        result.is_ok()
    }

    /// Clears the rename's destination for the next round; a root found there is a failure.
    fn clean(self, setup: &Setup) {
        let moved_to = match self {
            Shape::RenameIntoInner => "inner/x",
            Shape::RenameIntoSub => "sub/m",
            _ => return,
        };
        let path = setup.ws.join(moved_to);
        let Ok(found) = ino(&path) else { return };
        let root = setup.roots.iter().find(|(_, i)| **i == found);
        assert!(root.is_none(), "capfs moved root {root:?} to ws/{moved_to}");
        std::fs::remove_dir_all(&path).unwrap();
    }
}

#[test_case(Shape::RenameIntoInner, "ro", false ; "rename into inner root local")]
#[test_case(Shape::RenameIntoInner, "ro", true ; "rename into inner root remote")]
#[test_case(Shape::RenameIntoSub, "ro", false ; "rename into sub local")]
#[test_case(Shape::RenameIntoSub, "ro", true ; "rename into sub remote")]
#[test_case(Shape::RemoveRecursive, "e", false ; "recursive remove of empty root local")]
#[test_case(Shape::RemoveRecursive, "e", true ; "recursive remove of empty root remote")]
#[test_case(Shape::RemoveRecursive, "ro", false ; "recursive remove of read only root local")]
#[test_case(Shape::Remove, "e", false ; "remove of empty root local")]
#[test_case(Shape::Remove, "e", true ; "remove of empty root remote")]
#[test_case(Shape::RenameOver, "e", false ; "rename over empty root local")]
#[test_case(Shape::RenameOver, "e", true ; "rename over empty root remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_operation_moves_removes_or_replaces_a_root(shape: Shape, victim: &str, remote: bool) {
    let setup = setup(remote).await;
    let attacker = Attacker::start(&setup.ws, victim);
    let start = Instant::now();
    let (mut rounds, mut done) = (0, 0);
    while rounds < MAX_ROUNDS && start.elapsed() < RACE_TIME {
        shape.prepare(&setup.ws);
        done += usize::from(shape.run(&setup).await);
        shape.clean(&setup);
        rounds += 1;
    }
    let swaps = attacker.finish();
    eprintln!("{shape:?} against {victim}: rounds {rounds} succeeded {done} swaps {swaps}");
    setup.assert_roots_intact(victim);
    assert!(swaps > 0, "the attacker never managed an exchange");
    assert!(done > 0, "the operation never succeeded in {rounds} rounds");
}

/// The exchange-and-check of an overwriting rename keeps rename(2)'s rules: a file over a
/// directory, a directory over a file or over a non-empty directory are refused with the kernel's
/// error and leave both entries as they were; the others replace the destination.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwriting_rename_keeps_the_rules_of_rename(remote: bool) {
    let setup = setup(remote).await;
    let plant = |top: &Path| {
        for dir in ["", "d1", "d2", "full", "full/x"] {
            std::fs::create_dir(top.join(dir)).unwrap();
        }
        for file in ["f1", "f2"] {
            std::fs::write(top.join(file), file).unwrap();
        }
    };
    let cases = [
        ("f1", "f2"),
        ("f1", "d1"),
        ("d1", "f2"),
        ("d1", "full"),
        ("d1", "d2"),
        ("f1", "missing"),
    ];
    for (i, (from, to)) in cases.iter().enumerate() {
        let (mine, theirs) = (format!("c{i}"), setup.ws.join(format!("k{i}")));
        plant(&setup.ws.join(&mine));
        plant(&theirs);
        let got = setup
            .fs
            .rename(
                &setup.p(&format!("{mine}/{from}")),
                &setup.p(&format!("{mine}/{to}")),
                RenameOptions::default().with_overwrite(true),
            )
            .await;
        let want = std::fs::rename(theirs.join(from), theirs.join(to));
        assert_eq!(
            got.as_ref().map_err(|e| e.kind()),
            want.as_ref().map_err(|e| e.kind()),
            "{from} over {to}: {got:?} vs {want:?}"
        );
        let ours = snapshot(&setup.ws.join(&mine));
        let kernel = snapshot(&theirs);
        let shape = |t: &BTreeMap<PathBuf, Entry>| -> Vec<(PathBuf, bool)> {
            t.iter()
                .map(|(p, e)| (p.clone(), matches!(e.kind, crate::common::Kind::Dir)))
                .collect()
        };
        assert_eq!(
            shape(&ours),
            shape(&kernel),
            "{from} over {to}: trees differ"
        );
    }
}
