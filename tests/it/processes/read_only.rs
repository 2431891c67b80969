//! A directory kept read-only inside a writable root (codex's `.git` in `workspace-write`):
//! held by a read-only bind mount in the process's own mount namespace. Every change inside
//! it fails and changes nothing, the rest of the root stays writable, the directory cannot be
//! moved or unmounted, the host's mount table never sees the mount, and a link planted at its
//! name is refused rather than followed.

use std::io::ErrorKind;
use std::path::Path;

use capfs::AbsolutePathBuf;
use capfs::Access;
use capfs::process::{ExecutorProcesses, Network};

use super::{EXEC_UID, Workspace, policy, run, shell};
use crate::common::{assert_same_tree, snapshot};

/// Each step prints its marker only if the kernel let it happen.
const ATTEMPTS: &str = "\
echo x > .git/config && echo CHANGED-write
echo x >> .git/config && echo CHANGED-append
true > .git/config && echo CHANGED-truncate
touch .git/new && echo CHANGED-create
mkdir .git/newdir && echo CHANGED-mkdir
ln -s x .git/link && echo CHANGED-symlink
ln .git/config hard && echo CHANGED-hardlink-out
ln written .git/hard && echo CHANGED-hardlink-in
rm .git/config && echo CHANGED-delete
rm -rf .git/objects && echo CHANGED-rmdir
mv .git/config .git/moved && echo CHANGED-rename-inside
mv .git/config moved-out && echo CHANGED-rename-out
mv written .git/written && echo CHANGED-rename-in
chmod 777 .git/config && echo CHANGED-chmod
chmod 777 .git && echo CHANGED-chmod-dir
touch -d 2001-01-01 .git/config && echo CHANGED-utimes
mv .git moved-git && echo CHANGED-mv-dir
rm -rf .git && echo CHANGED-rm-dir
umount .git && echo CHANGED-umount
umount -l .git && echo CHANGED-umount-lazy
mount -o remount,rw .git && echo CHANGED-remount
unshare -Urm sh -c 'umount -l .git; mount -o remount,rw,bind .git; echo x > .git/config' \
  && echo CHANGED-nested-namespace
cat .git/config && echo READ-OK
echo elsewhere > elsewhere && echo WROTE-ROOT
";

fn git_tree(root: &Path) {
    let git = root.join(".git");
    std::fs::create_dir_all(git.join("objects/ab")).unwrap();
    std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(git.join("objects/ab/cdef"), "object").unwrap();
    std::fs::write(root.join("written"), "w").unwrap();
    // Owned by the process's user, so only the mount can refuse what the test attempts.
    for path in [
        git.clone(),
        git.join("config"),
        git.join("objects"),
        git.join("objects/ab"),
        git.join("objects/ab/cdef"),
        root.join("written"),
    ] {
        std::os::unix::fs::chown(&path, Some(EXEC_UID), Some(EXEC_UID)).unwrap();
    }
}

fn narrowing(root: &Path) -> Option<Vec<(AbsolutePathBuf, Access)>> {
    Some(vec![
        (AbsolutePathBuf::new(root).unwrap(), Access::ReadWrite),
        (
            AbsolutePathBuf::new(root.join(".git")).unwrap(),
            Access::ReadOnly,
        ),
    ])
}

fn mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_directory_inside_a_writable_root_changes_in_no_way() {
    let ws = Workspace::new();
    git_tree(&ws.root);
    let processes = ws.processes(policy(Network::None));
    let before = snapshot(&ws.root.join(".git"));
    let mounts_before = mountinfo();
    let mut request = shell("sh", ATTEMPTS, &ws.root);
    request.narrowing = narrowing(&ws.root);
    let done = run(&processes, request).await.unwrap();
    let text = done.text();
    println!("{text}");
    assert!(!text.contains("CHANGED-"), "{text}");
    assert!(
        text.contains("READ-OK") && text.contains("WROTE-ROOT"),
        "{text}"
    );
    assert_same_tree(&before, &snapshot(&ws.root.join(".git")), ".git");
    assert_eq!(
        std::fs::read(ws.root.join("elsewhere")).unwrap(),
        b"elsewhere\n"
    );
    assert!(!ws.root.join("hard").exists() && !ws.root.join("moved-git").exists());
    assert_eq!(mounts_before, mountinfo(), "the mount reached the host");
    // The same attempts without the read-only directory all succeed: the test can fail.
    let mut free = shell("sh", "echo x > .git/config && echo CHANGED-write", &ws.root);
    free.narrowing = Some(vec![(
        AbsolutePathBuf::new(&ws.root).unwrap(),
        Access::ReadWrite,
    )]);
    let done = run(&processes, free).await.unwrap();
    assert!(done.text().contains("CHANGED-write"), "{}", done.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_inside_it_is_read_only_too() {
    let ws = Workspace::new();
    git_tree(&ws.root);
    let processes = ws.processes(policy(Network::Loopback));
    let before = snapshot(&ws.root.join(".git"));
    let script = "echo x > here && echo CHANGED-here; echo x > objects/new && echo CHANGED-sub; \
                  cat config >/dev/null && echo READ-OK; echo y > ../beside && echo WROTE-ROOT";
    let mut request = shell("sh", script, &ws.root.join(".git"));
    request.narrowing = narrowing(&ws.root);
    let done = run(&processes, request).await.unwrap();
    let text = done.text();
    assert!(!text.contains("CHANGED-"), "{text}");
    assert!(
        text.contains("READ-OK") && text.contains("WROTE-ROOT"),
        "{text}"
    );
    assert_same_tree(&before, &snapshot(&ws.root.join(".git")), ".git");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_at_the_name_is_refused_and_marks_nothing() {
    let ws = Workspace::new();
    let processes = ws.processes(policy(Network::None));
    let outside = ws.root.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("canary"), "canary").unwrap();
    std::fs::create_dir(ws.root.join("src")).unwrap();
    std::os::unix::fs::chown(ws.root.join("src"), Some(EXEC_UID), Some(EXEC_UID)).unwrap();
    let outside_before = snapshot(&outside);
    let mounts_before = mountinfo();
    for target in ["src", "../outside"] {
        std::os::unix::fs::symlink(target, ws.root.join(".git")).unwrap();
        let mut request = shell("sh", "echo RAN", &ws.root);
        request.narrowing = narrowing(&ws.root);
        let err = processes.start(request).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{target}: {err}");
        std::fs::remove_file(ws.root.join(".git")).unwrap();
    }
    assert_eq!(mounts_before, mountinfo());
    assert_same_tree(&outside_before, &snapshot(&outside), "outside");
    // What the link pointed at inside the root stayed writable, and nothing else was mounted.
    let done = run(
        &processes,
        shell("sh", "echo ok > src/f && cat src/f", &ws.root),
    )
    .await
    .unwrap();
    assert_eq!(done.text(), "ok\n");
}

const INNER: &str = "CAPFS_PROCESS_TEST_UNPRIVILEGED_READ_ONLY";

/// Without root the mount namespace lies inside a user namespace of the process's own, where
/// the child may mount; the program it runs must still not be able to undo the mount.
#[test]
fn an_unprivileged_starter_keeps_it_read_only_too() {
    super::rerun_unprivileged("processes::read_only::unprivileged_inner", INNER);
}

#[tokio::test(flavor = "current_thread")]
async fn unprivileged_inner() {
    if std::env::var_os(INNER).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "config").unwrap();
    let sandbox = capfs::Sandbox::new()
        .with_root(&root, Access::ReadWrite)
        .unwrap();
    let processes =
        capfs::process::LocalProcesses::new(sandbox, capfs::process::ProcessPolicy::default())
            .unwrap();
    let before = snapshot(&root.join(".git"));
    let mounts_before = mountinfo();
    let script = "umount .git && echo CHANGED-umount; umount -l .git && echo CHANGED-lazy; \
        mount -o remount,rw,bind .git && echo CHANGED-remount; \
        unshare -Urm sh -c 'umount .git || mount -o remount,rw,bind .git; echo x > .git/config' \
        && echo CHANGED-nested; echo x > .git/config && echo CHANGED-write; \
        mv .git gone && echo CHANGED-mv; echo y > beside && echo WROTE-ROOT";
    let mut request = shell("sh", script, &root);
    request.narrowing = narrowing(&root);
    let done = run(&processes, request).await.unwrap();
    let text = done.text();
    println!("{text}");
    assert!(!text.contains("CHANGED-"), "{text}");
    assert!(text.contains("WROTE-ROOT"), "{text}");
    assert_same_tree(&before, &snapshot(&root.join(".git")), ".git");
    assert_eq!(mounts_before, mountinfo(), "the mount reached the host");
}
