//! The coreutils-like commands: `cp`, `mv`, globs, `ls -l`, `stat`, roots and relative paths,
//! and their errors and exit statuses.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_and_mv_follow_coreutils() {
    let env = Env::new().await;
    fs::create_dir(env.ws.join("a")).unwrap();
    fs::write(env.ws.join("a/x"), "x").unwrap();
    fs::create_dir(env.ws.join("b")).unwrap();
    // cp -r a b into an existing b gives b/a.
    env.ok(&["cp", "-r", &env.ws("a"), &env.ws("b")]);
    assert_eq!(fs::read_to_string(env.ws.join("b/a/x")).unwrap(), "x");
    // A new destination is the copy itself.
    env.ok(&["cp", "-r", &env.ws("a"), &env.ws("c")]);
    assert_eq!(fs::read_to_string(env.ws.join("c/x")).unwrap(), "x");
    // Several sources go into a directory; onto a file they are refused.
    fs::write(env.ws.join("one"), "1").unwrap();
    fs::write(env.ws.join("two"), "2").unwrap();
    env.ok(&["cp", &env.ws("one"), &env.ws("two"), &env.ws("c")]);
    assert_eq!(fs::read_to_string(env.ws.join("c/two")).unwrap(), "2");
    let refused = env.run(&["cp", &env.ws("one"), &env.ws("two"), &env.ws("c/x")]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not a directory"));
    // A trailing / demands a directory.
    let trailing = env.run(&["cp", &env.ws("one"), &format!("{}/", env.ws("missing"))]);
    assert!(!trailing.status.success(), "{}", describe(&trailing));
    assert!(!env.ws.join("missing").exists());
    // mv into a directory, and over an existing file as mv does.
    env.ok(&["mv", &env.ws("one"), &env.ws("b")]);
    assert!(env.ws.join("b/one").exists() && !env.ws.join("one").exists());
    env.ok(&["mv", &env.ws("two"), &env.ws("b/one")]);
    assert_eq!(fs::read_to_string(env.ws.join("b/one")).unwrap(), "2");
    fs::write(env.ws.join("three"), "3").unwrap();
    let kept = env.run(&["mv", "-n", &env.ws("three"), &env.ws("b/one")]);
    assert!(!kept.status.success());
    assert_eq!(fs::read_to_string(env.ws.join("b/one")).unwrap(), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_globs_expand_against_listings_and_double_dash_turns_them_off() {
    let env = Env::new().await;
    fs::create_dir(env.ws.join("d")).unwrap();
    for name in ["a.txt", "b.txt", "c.md", ".hidden.txt"] {
        fs::write(env.ws.join("d").join(name), name).unwrap();
    }
    let listed = env.ok(&["ls", &env.ws("d/*.txt")]);
    assert!(
        listed.contains("a.txt") && listed.contains("b.txt"),
        "{listed}"
    );
    assert!(
        !listed.contains("c.md") && !listed.contains("hidden"),
        "{listed}"
    );
    let cat = env.ok(&["cat", &env.ws("d/[ab].txt")]);
    assert_eq!(cat, "a.txtb.txt");
    // A destination pattern that matches nothing never becomes a file named `*.txt`.
    fs::write(env.local.join("x.txt"), "x").unwrap();
    let out = env.run(&["put", &env.local("x.txt"), &env.ws("e/*.txt")]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no match"));
    assert!(!env.ws.join("e").exists());
    // After `--` a pattern is a name.
    fs::write(env.ws.join("d/*"), "star").unwrap();
    let literal = env.ok(&["cat", "--", &env.ws("d/*")]);
    assert_eq!(literal, "star");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_l_stat_and_json_show_what_ls_shows_and_escape_names() {
    let env = Env::new().await;
    fs::write(env.ws.join("data"), vec![b'x'; 1536]).unwrap();
    fs::set_permissions(env.ws.join("data"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("data", env.ws.join("link")).unwrap();
    fs::create_dir(env.ws.join("sub")).unwrap();
    fs::write(env.ws.join("evil\x1b[2Jname\n"), "").unwrap();
    let long = env.ok(&["ls", "-l", &env.ws("")]);
    let lines: Vec<&str> = long.lines().collect();
    assert_eq!(lines.len(), 4, "{long}");
    assert!(lines[0].starts_with("-rw-r----- 1536 "), "{long}");
    assert!(lines[0].ends_with(" data"), "{long}");
    assert!(
        lines[1].ends_with(" 'evil'$'\\033''[2Jname'$'\\n'"),
        "{long}"
    );
    assert!(lines[2].starts_with("lrwxrwxrwx    4 ") && lines[2].ends_with(" link -> data"));
    assert!(
        lines[3].starts_with("drwx") && lines[3].ends_with(" sub"),
        "{long}"
    );
    assert!(!long.contains('\x1b'), "{long:?}");

    let stat = env.ok(&["stat", &env.ws("data")]);
    assert!(stat.contains("Size: 1.50 KiB (1536 bytes)"), "{stat}");
    assert!(stat.contains("Mode: 0640 (-rw-r-----)"), "{stat}");
    assert!(stat.contains("Type: regular file"), "{stat}");

    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["ls", "--json", &env.ws("")])).unwrap();
    let entries = json.as_array().unwrap();
    assert_eq!(entries.len(), 4);
    let link = entries.iter().find(|e| e["name"] == "link").unwrap();
    assert_eq!(link["type"], "symlink");
    assert_eq!(link["target"], "data");
    assert_eq!(link["targetType"], "file");
    let data = entries.iter().find(|e| e["name"] == "data").unwrap();
    assert_eq!(data["mode"], 0o640);
    assert_eq!(data["size"], 1536);
    assert!(data["modifiedAtMs"].as_i64().unwrap() > 0);
    let stat_json: serde_json::Value =
        serde_json::from_str(&env.ok(&["stat", "--json", &env.ws("data"), &env.ws("sub")]))
            .unwrap();
    assert_eq!(stat_json[0]["path"], env.ws("data"));
    assert_eq!(stat_json[1]["type"], "directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_listed_and_relative_paths_start_at_cd_or_the_only_root() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, ro) = (base.join("ws"), base.join("ro"));
    fs::create_dir_all(ws.join("sub")).unwrap();
    fs::create_dir(&ro).unwrap();
    fs::write(ws.join("sub/a"), "a").unwrap();
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
    let roots = run(&["roots"]);
    assert_eq!(
        String::from_utf8_lossy(&roots.stdout),
        format!(
            "{}\tread-write\n{}\tread-only\n",
            ws.display(),
            ro.display()
        )
    );
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["roots", "--json"]).stdout).unwrap();
    assert_eq!(json[1]["access"], "read-only");
    // Two roots: a relative path needs --cd, and the refusal says so.
    let refused = run(&["ls", "sub"]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--cd") && stderr.contains(ws.to_str().unwrap()),
        "{stderr}"
    );
    let cd = run(&["--cd", ws.join("sub").to_str().unwrap(), "cat", "a"]);
    assert_eq!(cd.stdout, b"a", "{}", describe(&cd));

    // One root: relative paths start there, `capfs --root . ls .` included.
    let one = client()
        .current_dir(&ws)
        .args(["--root", ".", "ls", "."])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&one.stdout),
        "sub/\n",
        "{}",
        describe(&one)
    );
    let roots = client()
        .current_dir(&ws)
        .args(["--root", ".", "roots"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&roots.stdout),
        format!("{}\tread-write\n", ws.display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_read_like_coreutils_with_distinct_exit_statuses() {
    let env = Env::new().await;
    let missing = env.ws("x");
    let out = env.run(&["stat", &missing]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("capfs: cannot stat '{missing}': No such file or directory\n")
    );
    let out = env.run(&["ls", &missing]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("capfs: cannot access '{missing}': No such file or directory\n")
    );
    // Outside the roots: permission denied.
    let out = env.run(&["cat", "/etc/passwd"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    // A missing local directory is blamed on the local side.
    fs::write(env.ws.join("a"), "a").unwrap();
    let local = env.local("no/such/file");
    let out = env.run(&["get", &env.ws("a"), &local]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("capfs: cannot create local file '{local}': No such file or directory\n")
    );
    // Usage: 2. Nobody listening: 5.
    assert_eq!(env.run(&["ls", "--bogus"]).status.code(), Some(2));
    let refused = client()
        .args(["--remote", "ws://127.0.0.1:1", "ls", "/"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(5), "{}", describe(&refused));
    for out in [&refused, &env.run(&["stat", &missing])] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("os error"), "{stderr}");
        assert!(!stderr.contains("fs/"), "{stderr}");
    }
}
