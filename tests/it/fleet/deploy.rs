//! The container of `deploy/kubernetes/`, run here: the binary started with the arguments and
//! environment both manifests give it (their mount paths and listen addresses mapped to this
//! machine's, nothing else changed), as the manifests' unprivileged user when the test runs as
//! root; its probes answer where the manifests probe them, and it serves.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use super::{Fleet, get};
use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

const MANIFESTS: [&str; 2] = ["executor.yaml", "sandbox-template.yaml"];
/// The user and group the manifests run the container as.
const POD_USER: u32 = 65532;
const TOKEN: &str = "deploy-t0ken-5d21";

/// The JSON of the one line of `manifest` that starts with `key: [` (the manifests write the
/// container's args and env as JSON flow sequences, which are YAML too).
fn flow_sequence(manifest: &str, key: &str) -> Vec<Value> {
    let prefix = format!("{key}: [");
    let lines: Vec<&str> = manifest
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with(&prefix))
        .collect();
    assert_eq!(lines.len(), 1, "one `{key}:` line");
    let json = lines[0].strip_prefix(&format!("{key}: ")).unwrap();
    serde_json::from_str::<Vec<Value>>(json).unwrap()
}

fn manifest(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kubernetes")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifests_container_serves_and_answers_its_probes() {
    let texts = MANIFESTS.map(manifest);
    let args = flow_sequence(&texts[0], "args");
    let env = flow_sequence(&texts[0], "env");
    for text in &texts[1..] {
        assert_eq!(
            flow_sequence(text, "args"),
            args,
            "the two manifests' args differ"
        );
        assert_eq!(
            flow_sequence(text, "env"),
            env,
            "the two manifests' env differ"
        );
    }
    for text in &texts {
        for probe in [
            "path: /healthz",
            "path: /readyz",
            "port: admin",
            "containerPort: 9300",
        ] {
            assert!(text.contains(probe), "{probe} missing from a manifest");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("workspace");
    std::fs::create_dir(&ws).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        for path in [&ws, &token] {
            std::os::unix::fs::chown(path, Some(POD_USER), Some(POD_USER)).unwrap();
        }
    }
    let ws = ws.canonicalize().unwrap();
    // What the pod has at these paths and addresses, this machine has at these.
    let mapped: Vec<String> = args
        .iter()
        .map(|arg| match arg.as_str().unwrap() {
            "ws://0.0.0.0:7300" => "ws://127.0.0.1:0".to_string(),
            "http://0.0.0.0:9300" => "http://127.0.0.1:0".to_string(),
            "/workspace" => ws.to_str().unwrap().to_string(),
            "/run/capfs/token" => token.to_str().unwrap().to_string(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(mapped[0], "serve");
    // The pod's user runs a second link of the binary beside the workspace, which it can reach
    // wherever the checkout lies (under a private directory, the build is out of its reach).
    let binary = dir.path().join("capfs");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_capfs"), &binary).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_capfs"), &binary).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut command = tokio::process::Command::new(&binary);
    command.args(&mapped).env_clear();
    for variable in &env {
        let (name, value) = (&variable["name"], &variable["value"]);
        command.env(name.as_str().unwrap(), value.as_str().unwrap());
    }
    if root {
        command.uid(POD_USER).gid(POD_USER);
    }
    let mut server = Fleet::spawn(command, true).await;
    let admin = server
        .admin
        .clone()
        .expect("the manifests serve an admin address");
    let admin = admin.strip_prefix("http://").unwrap();

    let health = get(admin, "/healthz", "").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    let ready = get(admin, "/readyz", "").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    let refused = get(admin, "/metrics", "").await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");

    let options = RemoteOptions::default().with_token(Some(TOKEN.into()));
    let fs = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap();
    let file = AbsolutePathBuf::new(ws.join("hello")).unwrap();
    fs.write_file(&file, b"from the pod".to_vec())
        .await
        .unwrap();
    assert_eq!(fs.read_file(&file).await.unwrap(), b"from the pod");
    let metrics = get(
        admin,
        "/metrics",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
    )
    .await;
    assert!(
        metrics.contains("capfs_requests_total{method=\"fs/writeFile\",outcome=\"ok\"} 1"),
        "{metrics}"
    );
    drop(fs);
    server.signal("TERM");
    assert!(server.exited().await.success());
}
