//! Through the real binary (`capfs serve --exec`), with the `sandbox` policy codex sends in
//! `workspace-write`: the project writable, its `.git` read-only. The command runs, writes
//! beside `.git`, and every change inside `.git` fails and changes nothing; a `.git` that is a
//! link is refused.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::codex_protocol::uri;
use crate::common::{assert_same_tree, snapshot};
use crate::process_serve::{exec_server, tree};
use crate::process_wire::{Peer, until_closed};
use crate::serve::error_of;

fn workspace_write(ws: &Path, id: &str, script: &str) -> Value {
    let special = |kind: &str, subpath: Option<&str>, access: &str| {
        let mut value = json!({"kind": kind});
        if let Some(subpath) = subpath {
            value["subpath"] = json!(subpath);
        }
        json!({"path": {"type": "special", "value": value}, "access": access})
    };
    json!({
        "processId": id, "argv": ["sh", "-c", script], "cwd": uri(ws.display()),
        "env": {"PATH": "/usr/bin:/bin"}, "tty": false, "pipeStdin": false, "arg0": null,
        "sandbox": {
            "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
                special("root", None, "read"),
                special("project_roots", None, "write"),
                special("project_roots", Some(".git"), "read"),
            ]}},
            "cwd": uri(ws.display()), "workspaceRoots": [uri(ws.display())],
        },
    })
}

fn open_to_all(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
}

#[tokio::test]
async fn codex_workspace_write_runs_with_its_git_directory_read_only() {
    let (_dir, ws, outside) = tree();
    let git = ws.join(".git");
    std::fs::create_dir_all(git.join("refs")).unwrap();
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    // Writable by the process's user: only the mount can refuse the writes.
    for path in [&git, &git.join("refs"), &git.join("HEAD")] {
        open_to_all(path);
    }
    let before = snapshot(&git);
    let outside_before = snapshot(&outside);
    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let server = exec_server(&ws).await;
    let mut peer = Peer::ready(&server.url).await;
    let script = "echo x > .git/HEAD && echo CHANGED-write; touch .git/new && echo CHANGED-create; \
        rm .git/HEAD && echo CHANGED-delete; mv .git/HEAD .git/h && echo CHANGED-rename; \
        chmod 600 .git/HEAD && echo CHANGED-chmod; rmdir .git/refs && echo CHANGED-rmdir; \
        mv .git moved && echo CHANGED-mv; umount .git && echo CHANGED-umount; \
        cat .git/HEAD; echo made > made && echo WROTE-ROOT";
    let reply = peer
        .request("process/start", workspace_write(&ws, "ww", script))
        .await;
    assert_eq!(reply["result"]["sandboxType"], "linuxSeccomp", "{reply}");
    let told = until_closed(&mut peer, "ww").await;
    let stdout = String::from_utf8_lossy(&told.stdout);
    assert!(!stdout.contains("CHANGED-"), "{stdout}");
    assert!(
        stdout.contains("ref: refs/heads/main") && stdout.contains("WROTE-ROOT"),
        "{stdout}{}",
        String::from_utf8_lossy(&told.stderr)
    );
    assert_eq!(told.exit_code, Some(0), "{stdout}");
    assert_eq!(std::fs::read(ws.join("made")).unwrap(), b"made\n");
    assert_same_tree(&before, &snapshot(&git), ".git");
    assert_same_tree(&outside_before, &snapshot(&outside), "outside");
    assert_eq!(
        mounts_before,
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
        "the mount reached the host"
    );
    // A `.git` that is a link cannot be held: it is refused, and what it names stays as is.
    std::fs::rename(&git, ws.join("real-git")).unwrap();
    std::os::unix::fs::symlink("real-git", &git).unwrap();
    let reply = peer
        .request("process/start", workspace_write(&ws, "link", "echo RAN"))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
}
