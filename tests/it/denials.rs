//! Why the sandbox refused: each rule's refusal carries its `Denial` on every backend, with the
//! message unchanged; errors that are not refusals carry none; and an OS error capfs names the
//! path of keeps its errno and source.

use std::io;

use crate::common::{Backend, TestEnv, env};
use capfs::error::{Denial, denial, raw_os_error};
use capfs::{AbsolutePathBuf, RemoveOptions, RenameOptions};
use test_case::test_case;

/// The refusal `result` gives, checked to be `PermissionDenied` with the reason's fixed text
/// after the path.
fn refusal<T: std::fmt::Debug>(result: io::Result<T>, path: &AbsolutePathBuf) -> Denial {
    let err = result.expect_err("the sandbox must refuse");
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    let reason = denial(&err).unwrap_or_else(|| panic!("no denial in {err:?}"));
    assert_eq!(err.to_string(), format!("{path}: {}", reason.text()));
    reason
}

async fn each_rule(env: &TestEnv) {
    let fs = &env.fs;
    let before = env.outside_snapshot();
    env.symlink("out", &env.outside);

    let through_link = env.p("out/secret");
    let got = refusal(fs.read_file(&through_link).await, &through_link);
    assert_eq!(got, Denial::Escape);
    let write_through = env.p("out/new");
    let got = refusal(
        fs.write_file(&write_through, b"x".to_vec()).await,
        &write_through,
    );
    assert_eq!(got, Denial::Escape);

    let outside = env.at("outside/secret");
    let got = refusal(fs.read_file(&outside).await, &outside);
    assert_eq!(got, Denial::OutsideRoots);

    let in_ro = env.at("ro/new");
    let got = refusal(fs.write_file(&in_ro, b"x".to_vec()).await, &in_ro);
    assert_eq!(got, Denial::ReadOnlyRoot);

    let got = refusal(
        fs.remove(&env.ws2, RemoveOptions::default()).await,
        &env.ws2,
    );
    assert_eq!(got, Denial::ProtectedRoot);
    // Moving the directory that holds a nested root would move that root.
    let holder = env.p("outer");
    let got = refusal(
        fs.rename(&holder, &env.p("moved"), RenameOptions::default())
            .await,
        &holder,
    );
    assert_eq!(got, Denial::ProtectedRoot);

    env.assert_outside_unchanged(&before);
    assert!(env.host("ws2").is_dir() && env.host("ws/outer/inner_ro/file").is_file());
    assert!(!env.host("ro/new").exists() && !env.host("outside/new").exists());
}

#[test_case(Backend::Local ; "local")]
#[test_case(Backend::Remote ; "remote")]
#[test_case(Backend::Relay ; "relay")]
#[tokio::test]
async fn every_refusal_says_which_rule_it_broke(backend: Backend) {
    each_rule(&env(backend).await).await;
}

#[test_case(Backend::Local ; "local")]
#[test_case(Backend::Remote ; "remote")]
#[test_case(Backend::Relay ; "relay")]
#[tokio::test]
async fn errors_that_are_not_refusals_carry_no_denial(backend: Backend) {
    let env = env(backend).await;
    let missing = env.p("missing");
    let err = env.fs.read_file(&missing).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(denial(&err), None);
    // A caller's own error with a refusal's words is not a refusal of the sandbox.
    let lookalike = io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{missing}: {}", Denial::ReadOnlyRoot.text()),
    );
    assert_eq!(denial(&lookalike), None);
}

#[tokio::test]
async fn a_named_os_error_keeps_its_errno_and_its_source() {
    let local = env(Backend::Local).await;
    let missing = local.p("missing");
    let err = local.fs.read_file(&missing).await.unwrap_err();
    let enoent = rustix::io::Errno::NOENT.raw_os_error();
    assert_eq!(
        err.to_string(),
        format!("{missing}: {}", io::Error::from_raw_os_error(enoent))
    );
    assert_eq!(raw_os_error(&err), Some(enoent));
    let source = std::error::Error::source(&err).expect("the OS error is the source");
    let source = source.downcast_ref::<io::Error>().expect("an io::Error");
    assert_eq!(source.raw_os_error(), Some(enoent));

    // The errno is the server's: it does not travel, and the client does not make one up.
    let remote = env(Backend::Remote).await;
    let err = remote.fs.read_file(&remote.p("missing")).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(raw_os_error(&err), None);
}
