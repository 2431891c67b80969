//! A confined program makes its own `execve` (its keeper is stopped meanwhile, sharing its
//! memory), while an unconfined one is run by the standard library through the C library's
//! `execvp`. Each case here runs both ways and must end the same: the same output, or the same
//! kind of refusal.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use capfs::AbsolutePathBuf;
use capfs::process::{LocalProcesses, Network, ProcessRequest};

use super::{Workspace, policy, run};

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn request(argv: &[&str], path: &str, cwd: &Path) -> ProcessRequest {
    let mut request = ProcessRequest::new(
        argv.iter().map(|a| (*a).to_owned()).collect(),
        AbsolutePathBuf::new(cwd).unwrap(),
    );
    request.env = vec![("PATH".into(), path.into()), ("LC_ALL".into(), "C".into())];
    request
}

/// The output, or the kind of error the start failed with.
async fn outcome(processes: &LocalProcesses, request: ProcessRequest) -> Result<String, ErrorKind> {
    match run(processes, request).await {
        Ok(done) => Ok(format!("{:?}: {}", done.exit, done.text())),
        Err(e) => Err(e.kind()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_program_is_looked_for_and_run_as_execvp_runs_an_unconfined_one() {
    let ws = Workspace::new();
    let root = &ws.root;
    let r = root.display();
    write(&root.join("a/tool"), "#!/bin/sh\necho from-a\n", 0o644);
    write(
        &root.join("b/tool"),
        "#!/bin/sh\necho from-b \"$0\" \"$@\"\n",
        0o755,
    );
    write(&root.join("c/plain"), "echo plain \"$0\" \"$@\"\n", 0o755);
    write(&root.join("only/denied"), "#!/bin/sh\necho ran\n", 0o644);
    std::fs::create_dir_all(root.join("d/tool")).unwrap();
    let mut named = request(&["sh", "-c", "echo \"$0\""], "/usr/bin:/bin", root);
    named.arg0 = Some("named".into());
    let cases = [
        // Passed over: a missing directory, a file that may not be run, a directory.
        (
            "search",
            request(
                &["tool", "x y"],
                &format!("{r}/missing:{r}/a:{r}/d:{r}/b"),
                root,
            ),
            Ok("from-b"),
        ),
        // A file with no executable format is run by the shell, with the path it was found at.
        (
            "script",
            request(&["plain", "z"], &format!("{r}/c"), root),
            Ok("plain"),
        ),
        (
            "refused",
            request(&["denied"], &format!("{r}/a:{r}/only"), root),
            Err(ErrorKind::PermissionDenied),
        ),
        (
            "missing",
            request(&["nothing"], &format!("{r}/a:{r}/b"), root),
            Err(ErrorKind::NotFound),
        ),
        (
            "relative",
            request(&["./b/tool", "w"], "/nowhere", root),
            Ok("from-b"),
        ),
        // An empty entry is the working directory.
        (
            "empty entry",
            request(&["tool"], "/nowhere::/bin", &root.join("b")),
            Ok("from-b"),
        ),
        ("arg0", named, Ok("named")),
    ];
    let confined = ws.processes(policy(Network::None));
    let unconfined = ws.processes(policy(Network::None).unconfined());
    for (name, request, expected) in cases {
        let ran = outcome(&confined, request.clone()).await;
        let reference = outcome(&unconfined, request).await;
        assert_eq!(ran, reference, "{name}");
        match (&ran, expected) {
            (Ok(text), Ok(expected)) => assert!(text.contains(expected), "{name}: {text}"),
            (Err(kind), Err(expected)) => assert_eq!(*kind, expected, "{name}"),
            _ => panic!("{name}: {ran:?}, expected {expected:?}"),
        }
    }
}
