//! Names that are not UTF-8 on the client's local roots (`--root`): shown escaped and distinct
//! from their lossy rendering, copied and removed by their exact bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::hostile_server::{describe, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_is_not_utf8_is_shown_escaped_and_acted_on_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir(&ws).unwrap();
    // `bad\xff` and the name its lossy rendering gives, `bad\u{fffd}`, side by side.
    let bad = OsStr::from_bytes(b"bad\xff");
    let lossy = "bad\u{fffd}";
    std::fs::write(ws.join(bad), b"the bad one").unwrap();
    std::fs::write(ws.join(lossy), b"the other").unwrap();
    let root = ws.to_str().unwrap();

    for args in [&["ls"][..], &["ls", "-l"], &["ls", "--json"]] {
        let mut all = vec!["--root", root];
        all.extend_from_slice(args);
        all.push(root);
        let out = run(&all).await;
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        let text = String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8");
        if args.contains(&"--json") {
            let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            let names: Vec<&str> = entries
                .iter()
                .map(|e| e["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, [lossy, r"'bad'$'\377'"], "{text}");
            continue;
        }
        assert!(text.contains(r"'bad'$'\377'"), "{args:?}: {text}");
        assert_eq!(text.matches(lossy).count(), 1, "{args:?}: {text}");
    }

    let copy = base.join("copy");
    let out = run(&[
        "--root",
        root,
        "get",
        "-r",
        "-q",
        root,
        copy.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(copy.join(bad)).unwrap(), b"the bad one");
    assert_eq!(std::fs::read(copy.join(lossy)).unwrap(), b"the other");

    // `rm` of the name as shown, pasted back by a shell: the exact bytes.
    let mut target = ws.as_os_str().to_os_string();
    target.push("/");
    target.push(bad);
    let out = tokio::time::timeout(
        crate::serve::WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
            .args(["--root".as_ref(), ws.as_os_str(), "rm".as_ref(), &target])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!ws.join(bad).exists());
    assert_eq!(std::fs::read(ws.join(lossy)).unwrap(), b"the other");

    // A failure names it by its bytes too, never as the other entry.
    let again = tokio::time::timeout(
        crate::serve::WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
            .args(["--root".as_ref(), ws.as_os_str(), "rm".as_ref(), &target])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(again.status.code(), Some(3), "{}", describe(&again));
    let stderr = String::from_utf8(again.stderr.clone()).unwrap();
    assert!(stderr.contains(r"'$'\377'"), "{}", describe(&again));
    assert!(!stderr.contains(lossy), "{}", describe(&again));
}
