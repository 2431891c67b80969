//! `put -r`'s source as the library's walk sees it: link texts, modes, times and names that are
//! not UTF-8 kept; links never followed out of it; sources past the walk's bounds refused before
//! anything is copied; sources named through a link, by a relative path or as `/`.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;

use super::*;

/// A time put on `run.sh`, which `-p` must keep.
const STAMP_SECS: u64 = 1_500_000_000;

/// A source tree beside `outside/dir/canary`: files of three modes, links that lead out of it
/// (to a directory, to a file, nowhere) and, with `latin1`, a name that is not UTF-8.
fn make_source(base: &Path, latin1: bool) -> PathBuf {
    let outside = base.join("outside");
    fs::create_dir_all(outside.join("dir")).unwrap();
    fs::write(outside.join("dir/canary"), "CANARY").unwrap();
    let source = base.join("source");
    fs::create_dir_all(source.join("sub")).unwrap();
    for (name, mode) in [("run.sh", 0o755), ("private", 0o600), ("shared", 0o640)] {
        fs::write(source.join(name), name).unwrap();
        fs::set_permissions(source.join(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    let stamp = std::time::UNIX_EPOCH + Duration::from_secs(STAMP_SECS);
    let file = fs::File::options().write(true).open(source.join("run.sh"));
    file.unwrap().set_modified(stamp).unwrap();
    if latin1 {
        fs::write(
            source.join("sub").join(OsStr::from_bytes(b"caf\xe9")),
            "latin-1",
        )
        .unwrap();
    }
    symlink("../outside/dir", source.join("up")).unwrap();
    symlink(outside.join("dir/canary"), source.join("abs")).unwrap();
    symlink("nowhere", source.join("sub/dangling")).unwrap();
    source
}

/// The copy at `copy` of `make_source`'s tree: links with their text, not what they lead to;
/// every mode and `run.sh`'s time.
fn assert_copied(base: &Path, copy: &Path) {
    assert_eq!(
        fs::read_link(copy.join("up")).unwrap(),
        Path::new("../outside/dir")
    );
    let canary = base.join("outside/dir/canary");
    assert_eq!(fs::read_link(copy.join("abs")).unwrap(), canary);
    assert_eq!(
        fs::read_link(copy.join("sub/dangling")).unwrap(),
        Path::new("nowhere")
    );
    // Never followed: the link to the outside directory is no directory of the copy.
    assert!(fs::symlink_metadata(copy.join("up")).unwrap().is_symlink());
    for (name, mode) in [("run.sh", 0o755), ("private", 0o600), ("shared", 0o640)] {
        assert_eq!(mode_of(copy.join(name)), mode, "{name}");
        assert_eq!(fs::read_to_string(copy.join(name)).unwrap(), name);
    }
    let modified = fs::metadata(copy.join("run.sh"))
        .unwrap()
        .modified()
        .unwrap();
    let stamp = std::time::UNIX_EPOCH + Duration::from_secs(STAMP_SECS);
    assert_eq!(modified, stamp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_r_keeps_link_texts_modes_times_and_names_that_are_not_utf8() {
    // On local roots: everything arrives, the name that is not UTF-8 by its exact bytes.
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let ws = base.join("ws");
    fs::create_dir(&ws).unwrap();
    let source = make_source(&base, true);
    let out = client()
        .arg("--root")
        .arg(&ws)
        .args(["put", "-r", "-p"])
        .arg(&source)
        .arg(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("put 4 files"));
    assert_copied(&base, &ws.join("source"));
    let latin1 = ws.join("source/sub").join(OsStr::from_bytes(b"caf\xe9"));
    assert_eq!(fs::read_to_string(latin1).unwrap(), "latin-1");

    // Through a server: the same tree without that name arrives the same way.
    let env = Env::new().await;
    let source = make_source(&env.local, false);
    let out = env.run(&["put", "-r", "-p", source.to_str().unwrap(), &env.ws("")]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_copied(&env.local, &env.ws.join("source"));
    // A name that is not UTF-8 cannot be named on the wire: a clear failure, as before.
    let name = source.join("sub").join(OsStr::from_bytes(b"caf\xe9"));
    fs::write(name, "latin-1").unwrap();
    let out = env.run(&["put", "-r", source.to_str().unwrap(), &env.ws("again")]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not valid UTF-8"), "{stderr}");
}

/// A chain of `levels` directories below `top`, each named by 255 bytes, the deepest holding
/// `files` empty files of such names: built through directory handles, as no path reaches it.
fn build_long_named_tree(top: &Path, levels: usize, files: usize) {
    use rustix::fs::{Mode, OFlags};
    fs::create_dir(top).unwrap();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut dir = rustix::fs::open(top, flags, Mode::empty()).unwrap();
    let long = |i: usize| format!("{i:05}{}", "n".repeat(250));
    for level in 0..levels {
        rustix::fs::mkdirat(&dir, long(level), Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(&dir, long(level), flags, Mode::empty()).unwrap();
    }
    let create = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
    for i in 0..files {
        rustix::fs::openat(&dir, long(i), create, Mode::from_raw_mode(0o644)).unwrap();
    }
}

/// The walk's bounds hold for `put -r` as for `get -r`: a source deeper than 1,024 levels, or
/// whose names hold more than 64 MiB, fails with a message naming the bound, and nothing of it
/// is copied; so does one holding a path longer than the kernel takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_r_of_a_source_past_a_bound_fails_before_anything_is_copied() {
    let env = Env::new().await;
    let deep = env.local.join("deep");
    crate::common::build_deep_tree(&deep, 1_030);
    let out = env.run(&["put", "-r", deep.to_str().unwrap(), &env.ws("")]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "capfs: '{}': the tree is more than 1024 levels deep; put -r copies no deeper\n",
            deep.display()
        )
    );
    assert_eq!(names_in(&env.ws), Vec::<String>::new());

    // 1,400 paths of 200 names of 255 bytes: about 70 MiB.
    let long = env.local.join("long");
    build_long_named_tree(&long, 200, 1_400);
    let out = env.run(&["put", "-r", long.to_str().unwrap(), &env.ws("")]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "capfs: '{}': the tree's names hold more than 67108864 bytes; put -r copies at most \
             that much\n",
            long.display()
        )
    );
    assert_eq!(names_in(&env.ws), Vec::<String>::new());

    // A file the walk reaches but whose path no system call takes fails the plan too.
    let far = env.local.join("far");
    build_long_named_tree(&far, 20, 1);
    let out = env.run(&["put", "-r", far.to_str().unwrap(), &env.ws("")]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.ends_with("': File name too long\n"), "{stderr}");
    assert_eq!(names_in(&env.ws), Vec::<String>::new());
}

/// A source named through a link is the directory it names, copied under the link's name; a
/// relative source is named as given in warnings; `/` goes nowhere without a name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_r_of_a_linked_relative_or_root_source_does_as_cp_does() {
    let env = Env::new().await;
    let tree = env.local.join("tree");
    fs::create_dir(&tree).unwrap();
    fs::write(tree.join("f"), "f").unwrap();
    mkfifo(&tree.join("fifo"));
    symlink("tree", env.local.join("link")).unwrap();
    let out = env
        .command()
        .current_dir(&env.local)
        .args(["put", "-r", "link", "tree/", &env.ws("")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for warning in ["'link/fifo'", "'tree/fifo'"] {
        let line = format!("capfs: warning: skipping special file {warning}\n");
        assert!(stderr.contains(&line), "{stderr}");
    }
    assert!(
        !fs::symlink_metadata(env.ws.join("link"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(names_in(&env.ws.join("link")), ["f"]);
    assert_eq!(names_in(&env.ws.join("tree")), ["f"]);

    let out = env.run(&["put", "-r", "/", &env.ws("")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a directory: name the file to write"),
        "{stderr}"
    );
}
