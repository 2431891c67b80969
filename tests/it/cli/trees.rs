//! `put -r` and `get -r`: whole trees with links, kept confined on both ends.

use super::*;

/// A tree of 1,000 files in 10 directories, with executables, a relative and a dangling
/// symlink, and a FIFO.
fn make_tree(top: &Path) {
    fs::create_dir(top).unwrap();
    for d in 0..10 {
        let dir = top.join(format!("d{d}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            let file = dir.join(format!("f{f}"));
            fs::write(&file, format!("{d}/{f}\n").repeat(f + 1)).unwrap();
            if f % 10 == 0 {
                fs::set_permissions(&file, fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
    }
    std::os::unix::fs::symlink("d0/f1", top.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere", top.join("dangling")).unwrap();
    mkfifo(&top.join("fifo"));
}

/// Every entry under `top`: relative path, kind, mode, and contents or link text.
fn snapshot(top: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for name in names_in(&top.join(&rel)) {
            let child = rel.join(&name);
            let path = top.join(&child);
            let m = fs::symlink_metadata(&path).unwrap();
            let what = if m.is_symlink() {
                format!("link {}", fs::read_link(&path).unwrap().display())
            } else if m.is_dir() {
                pending.push(child.clone());
                format!("dir {:o}", m.permissions().mode() & 0o777)
            } else if m.is_file() {
                format!(
                    "file {:o} {}",
                    m.permissions().mode() & 0o777,
                    fs::read_to_string(&path).unwrap()
                )
            } else {
                "special".to_string()
            };
            out.push((child.to_string_lossy().into_owned(), what));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_r_and_get_r_copy_a_tree_of_a_thousand_files_with_links() {
    let env = Env::new().await;
    let tree = env.local.join("tree");
    make_tree(&tree);
    let out = env.run(&["put", "-r", tree.to_str().unwrap(), &env.ws("")]);
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: skipping special file"),
        "{stderr}"
    );
    assert!(stderr.contains("fifo"), "{stderr}");
    assert!(stderr.contains("put 1000 files"), "{stderr}");
    let mut expected = snapshot(&tree);
    expected.retain(|(name, _)| name != "fifo");
    // An existing directory destination receives the tree under its own name.
    assert_eq!(snapshot(&env.ws.join("tree")), expected);

    let back = env.local.join("back");
    fs::create_dir(&back).unwrap();
    let out = env.run(&["get", "-r", &env.ws("tree"), back.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("got 1000 files"));
    assert_eq!(snapshot(&back.join("tree")), expected);

    // -q: no summary.
    let quiet = env.run(&["get", "-r", "-q", &env.ws("tree/d1"), &env.local("quiet")]);
    assert!(quiet.status.success(), "{}", describe(&quiet));
    assert!(quiet.stderr.is_empty(), "{}", describe(&quiet));
    assert_eq!(names_in(&env.local.join("quiet")).len(), 100);

    // Without -r a directory is refused.
    let refused = env.run(&["get", &env.ws("tree"), &env.local("nope")]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("use -r"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_that_put_r_creates_stay_confined_and_read_only_roots_refuse_them() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, ro, outside) = (base.join("ws"), base.join("ro"), base.join("outside"));
    for d in [&ws, &ro, &outside] {
        fs::create_dir(d).unwrap();
    }
    fs::write(outside.join("secret"), "CANARY-OUTSIDE").unwrap();
    let tree = base.join("tree");
    fs::create_dir(&tree).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), tree.join("absolute")).unwrap();
    std::os::unix::fs::symlink("../../outside/secret", tree.join("relative")).unwrap();
    let args: Vec<&OsStr> = vec![
        "--root".as_ref(),
        ws.as_os_str(),
        "--read-only".as_ref(),
        ro.as_os_str(),
    ];
    let server = ServerProcess::start_with(&args, &[]).await;
    let run = |extra: &[&str]| {
        client()
            .arg("--remote")
            .arg(&server.url)
            .args(extra)
            .output()
            .unwrap()
    };
    let put = run(&["put", "-r", tree.to_str().unwrap(), ws.to_str().unwrap()]);
    assert!(put.status.success(), "{}", describe(&put));
    // The links exist with their text, and following them is refused.
    assert_eq!(
        fs::read_link(ws.join("tree/absolute")).unwrap(),
        outside.join("secret")
    );
    for link in ["absolute", "relative"] {
        let cat = run(&["cat", ws.join("tree").join(link).to_str().unwrap()]);
        assert_eq!(cat.status.code(), Some(4), "{link}: {}", describe(&cat));
        assert!(!String::from_utf8_lossy(&cat.stdout).contains("CANARY"));
    }
    // A write through such a link is refused too, and the outside file is unchanged.
    fs::write(base.join("x"), "overwrite").unwrap();
    let through = run(&[
        "put",
        base.join("x").to_str().unwrap(),
        ws.join("tree/relative").to_str().unwrap(),
    ]);
    assert_eq!(through.status.code(), Some(4), "{}", describe(&through));
    assert_eq!(
        fs::read_to_string(outside.join("secret")).unwrap(),
        "CANARY-OUTSIDE"
    );
    // A read-only root takes no links.
    let refused = run(&["put", "-r", tree.to_str().unwrap(), ro.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(4), "{}", describe(&refused));
    assert_eq!(names_in(&ro), Vec::<String>::new());
}

/// A server that lists a directory `/ws/d` holding an entry named `evil` (a name that must
/// never become a local path component), then answers everything else with a file.
async fn hostile_listing_server(evil: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        while let Some(Ok(frame)) = ws.next().await {
            let Message::Text(text) = frame else { continue };
            let request: serde_json::Value = serde_json::from_str(&text).unwrap();
            let id = request["id"].clone();
            let path = request["params"]["path"].as_str().unwrap_or("").to_string();
            let result = match request["method"].as_str().unwrap_or("") {
                "initialize" => serde_json::json!({}),
                "fs/getMetadata" if path == "/ws/d" => {
                    serde_json::json!({"isDirectory": true, "isFile": false, "mode": 493})
                }
                "fs/getMetadata" => {
                    serde_json::json!({"isDirectory": false, "isFile": true, "size": 5})
                }
                "fs/readDirectory" => serde_json::json!({"entries": [
                    {"fileName": evil, "isDirectory": false, "isFile": true}]}),
                "fs/readFile" => serde_json::json!({"dataBase64": "b3duZWQ="}),
                _ => continue,
            };
            if !id.is_null() {
                let reply = serde_json::json!({"id": id, "result": result});
                ws.send(Message::text(reply.to_string())).await.unwrap();
            }
        }
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_refuses_names_that_would_leave_the_destination() {
    for evil in ["../escaped", "..", "a/../../escaped", ""] {
        let (url, server) = hostile_listing_server(evil).await;
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        fs::create_dir(&inner).unwrap();
        let out = client()
            .args(["--remote", &url, "get", "-r", "/ws/d"])
            .arg(inner.join("copy"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{evil:?}: {}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid name"),
            "{evil:?}: {}",
            describe(&out)
        );
        assert_eq!(names_in(dir.path()), ["inner"], "{evil:?}");
        assert_eq!(names_in(&inner), Vec::<String>::new(), "{evil:?}");
        server.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_get_r_replaces_the_links_the_first_made_instead_of_following_them() {
    let env = Env::new().await;
    let outside = env.local.join("outside");
    fs::create_dir_all(outside.join("dir")).unwrap();
    fs::write(outside.join("bashrc"), "mine").unwrap();
    // First run: the remote tree holds links to the person's own files.
    fs::create_dir(env.ws.join("tree")).unwrap();
    std::os::unix::fs::symlink(outside.join("bashrc"), env.ws.join("tree/a")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), env.ws.join("tree/sub")).unwrap();
    let dest = env.local.join("dest");
    fs::create_dir(&dest).unwrap();
    env.ok(&["get", "-r", "-q", &env.ws("tree"), dest.to_str().unwrap()]);
    assert!(
        fs::symlink_metadata(dest.join("tree/a"))
            .unwrap()
            .is_symlink()
    );
    // Then the remote side turns them into a file and a directory of the same names.
    fs::remove_file(env.ws.join("tree/a")).unwrap();
    fs::write(env.ws.join("tree/a"), "planted").unwrap();
    fs::remove_file(env.ws.join("tree/sub")).unwrap();
    fs::create_dir(env.ws.join("tree/sub")).unwrap();
    fs::write(env.ws.join("tree/sub/f"), "planted").unwrap();
    let second = env.run(&["get", "-r", "-q", &env.ws("tree"), dest.to_str().unwrap()]);
    // The link to a file is replaced by the file; the link to a directory is refused.
    assert_eq!(fs::read_to_string(outside.join("bashrc")).unwrap(), "mine");
    assert_eq!(fs::read_to_string(dest.join("tree/a")).unwrap(), "planted");
    assert!(!second.status.success(), "{}", describe(&second));
    assert_eq!(names_in(&outside.join("dir")), Vec::<String>::new());
}

/// `get -r` plans a tree from one `capfs/walk`: no directory is listed and no entry stat'ed or
/// its link read one by one, and the copy still has the modes, times (`-p`) and link text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_over_a_server_is_one_walk_and_no_listings() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, local) = (base.join("ws"), base.join("local"));
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&local).unwrap();
    let tree = ws.join("tree");
    make_tree(&tree);
    fs::set_permissions(tree.join("d3"), fs::Permissions::from_mode(0o750)).unwrap();
    let stamp = std::time::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    fs::File::options()
        .write(true)
        .open(tree.join("d2/f7"))
        .unwrap()
        .set_modified(stamp)
        .unwrap();
    let audit = base.join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit).await;
    let out = client()
        .args(["--remote", &server.url, "get", "-r", "-p"])
        .arg(&tree)
        .arg(local.join("copy"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("got 1000 files"), "{stderr}");
    assert!(stderr.contains("skipping special file"), "{stderr}");
    let mut expected = snapshot(&tree);
    expected.retain(|(name, _)| name != "fifo");
    assert_eq!(snapshot(&local.join("copy")), expected);
    let copied = fs::metadata(local.join("copy/d2/f7")).unwrap();
    assert_eq!(copied.modified().unwrap(), stamp);
    server.stop().await;
    let methods: Vec<String> = fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            line["method"].as_str().unwrap().to_string()
        })
        .collect();
    let count = |m: &str| methods.iter().filter(|x| *x == m).count();
    assert_eq!(count("capfs/walk"), 1, "{methods:?}");
    assert_eq!(count("fs/readDirectory"), 0, "{methods:?}");
    assert_eq!(count("capfs/readLink"), 0, "{methods:?}");
    // The top's own stat, and no other.
    assert_eq!(count("fs/getMetadata"), 1, "{methods:?}");
    let reads = count("capfs/readFileStream") + count("fs/readFile");
    assert_eq!(reads, 1000, "{methods:?}");
}

/// A tree deeper than one walk goes is walked on from each directory left at its depth, and
/// copied whole; one too large for the server's message is planned by listing instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_copies_trees_deeper_than_a_walk_or_larger_than_a_message() {
    let env = Env::with_args(&["--max-message-bytes", "64K"]).await;
    // 300 levels: more than the 256 one walk lists.
    crate::common::build_deep_tree(&env.ws.join("deep"), 300);
    let out = env.run(&["get", "-r", "-q", &env.ws("deep"), &env.local("deep")]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        crate::common::deep_tree_depth(&env.local.join("deep")),
        (300, true)
    );
    // 1,000 files with their modes and times pass 64 KiB in one walk's reply.
    let tree = env.ws.join("tree");
    make_tree(&tree);
    let out = env.run(&["get", "-r", &env.ws("tree"), &env.local("copy")]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("got 1000 files"));
    let mut expected = snapshot(&tree);
    expected.retain(|(name, _)| name != "fifo");
    assert_eq!(snapshot(&env.local.join("copy")), expected);
}
