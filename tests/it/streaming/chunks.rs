//! `write_file_from_chunks`: a streamed write whose contents come in the caller's own buffers,
//! written from there by the local backend and read through the default implementation by
//! the remote one (whose server hands its data frames to the local backend the same way).

use std::collections::VecDeque;
use std::io;
use std::task::{Context, Poll};

use bytes::Bytes;
use capfs::WriteChunks;

use super::*;

/// Pieces handed over one by one, then an end or an error.
struct Pieces(VecDeque<io::Result<Bytes>>);

impl Pieces {
    fn of(pieces: &[Vec<u8>]) -> Self {
        Self(pieces.iter().map(|p| Ok(Bytes::from(p.clone()))).collect())
    }

    fn failing_after(pieces: &[Vec<u8>], kind: ErrorKind) -> Self {
        let mut this = Self::of(pieces);
        this.0
            .push_back(Err(io::Error::new(kind, "the source broke")));
        this
    }
}

impl WriteChunks for Pieces {
    fn poll_next_chunk(&mut self, _: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        Poll::Ready(self.0.pop_front().transpose())
    }
}

/// Pieces of every kind: empty ones, more one-byte pieces than a batch takes, whole data
/// frames, and an odd tail.
fn assorted() -> Vec<Vec<u8>> {
    let mut pieces = vec![Vec::new(), pattern(3, 1)];
    pieces.extend((0..40).map(|i| vec![i as u8]));
    pieces.push(Vec::new());
    pieces.extend((0..5).map(|i| pattern(256 << 10, i)));
    pieces.push(pattern(1000, 7));
    pieces
}

/// The local backend and a remote one over an in-process server, on the same workspace.
async fn backends(
    ws: &Path,
) -> (
    InProcessServer,
    Vec<(&'static str, Arc<dyn ExecutorFileSystem>)>,
) {
    let server = InProcessServer::serving(ws).await;
    let sandbox = Sandbox::new().with_root(ws, Access::ReadWrite).unwrap();
    let local = LocalFileSystem::new(sandbox);
    let remote = client(&server.url).await;
    let backends: Vec<(&'static str, Arc<dyn ExecutorFileSystem>)> =
        vec![("local", Arc::new(local)), ("remote", Arc::new(remote))];
    (server, backends)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_of_every_size_join_into_the_file() {
    let (_dir, ws) = workspace();
    let (server, backends) = backends(&ws).await;
    let pieces = assorted();
    let whole = pieces.concat();
    for (name, fs) in &backends {
        for size in [Some(whole.len() as u64), None] {
            let path = AbsolutePathBuf::new(ws.join(format!("{name}-{}", size.is_some()))).unwrap();
            std::fs::write(path.as_path(), b"old").unwrap();
            let mut seen = Vec::new();
            let written = fs
                .write_file_from_chunks(
                    &path,
                    &mut Pieces::of(&pieces),
                    size,
                    WriteOptions::default(),
                    &mut |n| seen.push(n),
                )
                .await
                .unwrap_or_else(|e| panic!("{name}, size {size:?}: {e}"));
            assert_eq!(written, whole.len() as u64, "{name}");
            assert_eq!(seen.last(), Some(&written), "{name}");
            assert!(
                std::fs::read(path.as_path()).unwrap() == whole,
                "{name}, size {size:?}: the file is not the pieces joined"
            );
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_breaks_or_miscounts_leaves_the_old_file() {
    let (_dir, ws) = workspace();
    let (server, backends) = backends(&ws).await;
    let pieces = assorted();
    let whole = pieces.concat().len() as u64;
    for (name, fs) in &backends {
        let path = AbsolutePathBuf::new(ws.join(format!("{name}-kept"))).unwrap();
        std::fs::write(path.as_path(), b"old").unwrap();
        let cases = [
            (
                "fails midway",
                Pieces::failing_after(&pieces, ErrorKind::ConnectionAborted),
                None,
            ),
            ("ends early", Pieces::of(&pieces), Some(whole + 1)),
            ("carries more", Pieces::of(&pieces), Some(whole - 1)),
            ("carries more than nothing", Pieces::of(&pieces), Some(0)),
        ];
        for (case, mut source, size) in cases {
            let err = fs
                .write_file_from_chunks(
                    &path,
                    &mut source,
                    size,
                    WriteOptions::default(),
                    &mut |_| {},
                )
                .await
                .expect_err(case);
            let expected = match case {
                "fails midway" => ErrorKind::ConnectionAborted,
                "ends early" => ErrorKind::UnexpectedEof,
                _ => ErrorKind::InvalidInput,
            };
            assert_eq!(err.kind(), expected, "{name}, {case}: {err}");
            assert_eq!(
                std::fs::read(path.as_path()).unwrap(),
                b"old",
                "{name}, {case}"
            );
        }
    }
    // Nothing staged was left behind.
    let mut names: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["local-kept", "remote-kept"]);
    server.stop().await;
}
