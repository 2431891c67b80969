//! The hostile table: one line per planted tree and operation, expanded for every backend.

use super::*;

/// Expands the table into a module of tests for one backend; `hostile_table!(relay,
/// Backend::Relay)` is all it takes to run every case through a relay as well.
macro_rules! hostile_table {
    ($backend:ident, $remote:expr) => {
        mod $backend {
            use super::*;
            use test_case::test_case;

            // Lexical escapes and paths under no root.
            #[test_case(Plant::Plain, Op::Read("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot read")]
            #[test_case(Plant::Plain, Op::Write("ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot write")]
            #[test_case(Plant::Plain, Op::Write("ws/sub/../../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot write deep")]
            #[test_case(Plant::Plain, Op::Mkdir("ws/../outside/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot mkdir")]
            #[test_case(Plant::Plain, Op::Meta("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot metadata")]
            #[test_case(Plant::Plain, Op::ReadDir("ws/.."), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot read dir of parent")]
            #[test_case(Plant::Plain, Op::Remove("ws/../outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot remove")]
            #[test_case(Plant::Plain, Op::Remove("ws/.."), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot remove parent of root")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot copy destination")]
            #[test_case(Plant::Plain, Op::Copy("ws/../outside", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dotdot copy source")]
            #[test_case(Plant::Plain, Op::Rename("ws/f", "ws/../outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dotdot rename destination")]
            #[test_case(Plant::Plain, Op::Rename("ws/../outside/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dotdot rename source")]
            #[test_case(Plant::Plain, Op::Read("outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "no root read")]
            #[test_case(Plant::Plain, Op::Read("/etc/passwd"), Expect::Err(PermissionDenied), Then::Nothing ; "etc passwd read")]
            #[test_case(Plant::Plain, Op::Meta("/"), Expect::Err(PermissionDenied), Then::Nothing ; "slash metadata")]
            #[test_case(Plant::Plain, Op::Remove("/"), Expect::Err(PermissionDenied), Then::Nothing ; "slash remove")]
            #[test_case(Plant::Plain, Op::Write("wsx/f"), Expect::Err(PermissionDenied), Then::Nothing ; "root name prefix is not a root")]
            // Absolute symlink out of the root.
            #[test_case(Plant::AbsLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link read")]
            #[test_case(Plant::AbsLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Link("ws/l", "{out}/secret") ; "abs link write")]
            #[test_case(Plant::AbsLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link metadata")]
            #[test_case(Plant::AbsLink, Op::Remove("ws/l"), Expect::Ok, Then::Gone("ws/l") ; "abs link remove removes the link only")]
            #[test_case(Plant::AbsLink, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "{out}/secret") ; "abs link copy copies link text")]
            #[test_case(Plant::AbsLink, Op::Copy("ws/f", "ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "abs link as copy destination")]
            #[test_case(Plant::AbsLink, Op::Rename("ws/l", "ws/moved"), Expect::Ok, Then::Link("ws/moved", "{out}/secret") ; "abs link rename moves the link")]
            #[test_case(Plant::AbsLink, Op::Mkdir("ws/l", false), Expect::Err(AlreadyExists), Then::Nothing ; "abs link mkdir")]
            // Relative symlink out of the root.
            #[test_case(Plant::RelLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link read")]
            #[test_case(Plant::RelLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link write")]
            #[test_case(Plant::RelLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "rel link metadata")]
            #[test_case(Plant::RelLink, Op::Copy("ws/l", "ws2/l"), Expect::Ok, Then::Link("ws2/l", "../outside/secret") ; "rel link copy across roots keeps text")]
            // Intermediate directory symlink out of the root.
            #[test_case(Plant::AbsDirLink, Op::Read("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link read")]
            #[test_case(Plant::AbsDirLink, Op::Write("ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link write")]
            #[test_case(Plant::AbsDirLink, Op::Write("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link overwrite")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir recursive")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new", false), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir")]
            #[test_case(Plant::AbsDirLink, Op::Mkdir("ws/d/new/deeper", true), Expect::Err(PermissionDenied), Then::Nothing ; "dir link mkdir deeper")]
            #[test_case(Plant::AbsDirLink, Op::Meta("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link metadata")]
            #[test_case(Plant::AbsDirLink, Op::ReadDir("ws/d"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link read dir")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link remove inside")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d/sub"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link remove dir inside")]
            #[test_case(Plant::AbsDirLink, Op::Remove("ws/d"), Expect::Ok, Then::Gone("ws/d") ; "dir link remove removes the link only")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link copy source")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d/sub", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link copy dir source")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/f", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link copy destination")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/sub", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link copy tree destination")]
            #[test_case(Plant::AbsDirLink, Op::Copy("ws/d", "ws/d2"), Expect::Ok, Then::Link("ws/d2", "{out}") ; "dir link copy copies the link")]
            #[test_case(Plant::AbsDirLink, Op::Rename("ws/f", "ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "dir link rename destination")]
            #[test_case(Plant::AbsDirLink, Op::Rename("ws/d/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "dir link rename source")]
            // Relative intermediate directory symlink.
            #[test_case(Plant::RelDirLink, Op::Read("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link read")]
            #[test_case(Plant::RelDirLink, Op::Write("ws/d/new"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link write")]
            #[test_case(Plant::RelDirLink, Op::Mkdir("ws/d/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link mkdir")]
            #[test_case(Plant::RelDirLink, Op::Remove("ws/d/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link remove")]
            #[test_case(Plant::RelDirLink, Op::ReadDir("ws/d/sub"), Expect::Err(PermissionDenied), Then::Nothing ; "rel dir link read dir")]
            // `up -> ..`
            #[test_case(Plant::UpLink, Op::Read("ws/up/outside/secret"), Expect::Err(PermissionDenied), Then::Nothing ; "up link read")]
            #[test_case(Plant::UpLink, Op::Write("ws/up/outside/new"), Expect::Err(PermissionDenied), Then::Nothing ; "up link write")]
            #[test_case(Plant::UpLink, Op::Remove("ws/up/outside"), Expect::Err(PermissionDenied), Then::Nothing ; "up link remove outside tree")]
            #[test_case(Plant::UpLink, Op::Remove("ws/up/ws"), Expect::Err(PermissionDenied), Then::Nothing ; "up link remove own root")]
            #[test_case(Plant::UpLink, Op::Rename("ws/up/outside/secret", "ws/stolen"), Expect::Err(PermissionDenied), Then::Gone("ws/stolen") ; "up link rename")]
            // Dangling links.
            #[test_case(Plant::DanglingOut, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Link("ws/l", "{out}/new") ; "dangling out write creates nothing")]
            #[test_case(Plant::DanglingOut, Op::Copy("ws/f", "ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "dangling out copy destination")]
            #[test_case(Plant::DanglingOut, Op::Mkdir("ws/l", true), Expect::Err(AlreadyExists), Then::Nothing ; "dangling out mkdir recursive")]
            #[test_case(Plant::DanglingOut, Op::Mkdir("ws/l/x", true), Expect::Err(PermissionDenied), Then::Nothing ; "dangling out mkdir below")]
            #[test_case(Plant::DanglingIn, Op::Write("ws/l"), Expect::Ok, Then::File("ws/nonexistent", WRITTEN) ; "dangling in write creates target inside")]
            #[test_case(Plant::DanglingIn, Op::Read("ws/l"), Expect::Err(NotFound), Then::Nothing ; "dangling in read")]
            // Loops.
            #[test_case(Plant::SelfLoop, Op::Read("ws/l"), Expect::Loop, Then::Nothing ; "self loop read")]
            #[test_case(Plant::SelfLoop, Op::Write("ws/l"), Expect::Loop, Then::Nothing ; "self loop write")]
            #[test_case(Plant::SelfLoop, Op::Meta("ws/l"), Expect::Loop, Then::Nothing ; "self loop metadata")]
            #[test_case(Plant::SelfLoop, Op::ReadDir("ws/l"), Expect::Loop, Then::Nothing ; "self loop read dir")]
            #[test_case(Plant::SelfLoop, Op::Remove("ws/l"), Expect::Ok, Then::Gone("ws/l") ; "self loop remove")]
            #[test_case(Plant::SelfLoop, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "l") ; "self loop copy copies the link")]
            #[test_case(Plant::PingPong, Op::Read("ws/a"), Expect::Loop, Then::Nothing ; "ping pong read")]
            #[test_case(Plant::PingPong, Op::Write("ws/b"), Expect::Loop, Then::Nothing ; "ping pong write")]
            #[test_case(Plant::Chain(41), Op::Read("ws/c0"), Expect::Loop, Then::Nothing ; "chain of 41 read")]
            #[test_case(Plant::Chain(41), Op::Write("ws/c0"), Expect::Loop, Then::Nothing ; "chain of 41 write")]
            #[test_case(Plant::Chain(40), Op::Read("ws/c0"), Expect::Ok, Then::Read(INSIDE) ; "chain of 40 read")]
            #[test_case(Plant::Chain(40), Op::Write("ws/c0"), Expect::Ok, Then::File("ws/f", WRITTEN) ; "chain of 40 write")]
            // Magic links.
            #[test_case(Plant::ProcLink, Op::Read("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link read")]
            #[test_case(Plant::ProcLink, Op::Write("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link write")]
            #[test_case(Plant::ProcLink, Op::Meta("ws/l"), Expect::Err(PermissionDenied), Then::Nothing ; "proc link metadata")]
            // Special files.
            #[test_case(Plant::Fifo, Op::Read("ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo read")]
            #[test_case(Plant::Fifo, Op::Copy("ws/p", "ws/copy"), Expect::Err(InvalidInput), Then::Gone("ws/copy") ; "fifo copy source")]
            #[test_case(Plant::Fifo, Op::Copy("ws/f", "ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo copy destination")]
            #[test_case(Plant::Fifo, Op::Write("ws/p"), Expect::Err(InvalidInput), Then::Nothing ; "fifo write")]
            #[test_case(Plant::Fifo, Op::Meta("ws/p"), Expect::Ok, Then::Nothing ; "fifo metadata")]
            #[test_case(Plant::Fifo, Op::Remove("ws/p"), Expect::Ok, Then::Gone("ws/p") ; "fifo remove")]
            #[test_case(Plant::Socket, Op::Read("ws/s"), Expect::Err(InvalidInput), Then::Nothing ; "socket read")]
            #[test_case(Plant::Socket, Op::Copy("ws/s", "ws/copy"), Expect::Err(InvalidInput), Then::Gone("ws/copy") ; "socket copy source")]
            #[test_case(Plant::FifoLink, Op::Read("ws/l"), Expect::Err(InvalidInput), Then::Nothing ; "link to fifo read")]
            #[test_case(Plant::FifoLink, Op::Copy("ws/l", "ws/l2"), Expect::Ok, Then::Link("ws/l2", "p") ; "link to fifo copy copies the link")]
            #[test_case(Plant::DirLikeFile, Op::Read("ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file read")]
            #[test_case(Plant::DirLikeFile, Op::Write("ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file write")]
            #[test_case(Plant::DirLikeFile, Op::Copy("ws/f", "ws/f.txt"), Expect::Err(IsADirectory), Then::Nothing ; "dir named like file copy destination")]
            #[test_case(Plant::Plain, Op::Read("ws/f/x"), Expect::Err(NotADirectory), Then::Nothing ; "file used as directory")]
            #[test_case(Plant::Plain, Op::ReadDir("ws/f"), Expect::Err(NotADirectory), Then::Nothing ; "read dir of file")]
            // Hard link to an outside file (planted by someone outside): a write replaces the link only.
            #[test_case(Plant::HardLink, Op::Write("ws/h"), Expect::Ok, Then::File("ws/h", WRITTEN) ; "hard link write keeps outside content")]
            #[test_case(Plant::HardLink, Op::Remove("ws/h"), Expect::Ok, Then::Gone("ws/h") ; "hard link remove")]
            // Read-only root.
            #[test_case(Plant::Plain, Op::Read("ro/file"), Expect::Ok, Then::Read(b"read-only content") ; "read only read")]
            #[test_case(Plant::Plain, Op::Write("ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "read only write")]
            #[test_case(Plant::Plain, Op::Write("ro/new"), Expect::Err(PermissionDenied), Then::Nothing ; "read only create")]
            #[test_case(Plant::Plain, Op::Mkdir("ro/new", true), Expect::Err(PermissionDenied), Then::Nothing ; "read only mkdir")]
            #[test_case(Plant::Plain, Op::Remove("ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "read only remove")]
            #[test_case(Plant::Plain, Op::Remove("ro/dir"), Expect::Err(PermissionDenied), Then::Nothing ; "read only remove dir")]
            #[test_case(Plant::Plain, Op::Rename("ro/file", "ro/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "read only rename")]
            #[test_case(Plant::Plain, Op::Rename("ro/file", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "read only rename out")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ro/copy"), Expect::Err(PermissionDenied), Then::Nothing ; "read only copy destination")]
            #[test_case(Plant::Plain, Op::Copy("ws/sub", "ro/copy"), Expect::Err(PermissionDenied), Then::Nothing ; "read only copy tree destination")]
            #[test_case(Plant::Plain, Op::Copy("ro/dir", "ws/copy"), Expect::Ok, Then::File("ws/copy/inner", b"inner") ; "read only copy source")]
            // Roots themselves.
            #[test_case(Plant::Plain, Op::Remove("ws"), Expect::Err(PermissionDenied), Then::Nothing ; "remove root")]
            #[test_case(Plant::Plain, Op::Remove("ws/."), Expect::Err(PermissionDenied), Then::Nothing ; "remove root dot")]
            #[test_case(Plant::Plain, Op::Remove("ws/sub/.."), Expect::Err(PermissionDenied), Then::Nothing ; "remove root sub dotdot")]
            #[test_case(Plant::Plain, Op::Remove("ro"), Expect::Err(PermissionDenied), Then::Nothing ; "remove read only root")]
            #[test_case(Plant::Plain, Op::Rename("ws", "ws2/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename root")]
            #[test_case(Plant::Plain, Op::Rename("ws/f", "ws2"), Expect::Err(PermissionDenied), Then::Nothing ; "rename onto root")]
            #[test_case(Plant::Plain, Op::Copy("ws/f", "ws"), Expect::Err(IsADirectory), Then::Nothing ; "copy file onto root")]
            #[test_case(Plant::RootLink, Op::Remove("ws/r"), Expect::Ok, Then::File("ws/f", INSIDE) ; "remove link to root removes the link only")]
            #[test_case(Plant::RootLink, Op::Read("ws/r/f"), Expect::Ok, Then::Nothing ; "absolute link to own root is followed inside it")]
            // Copy of a tree holding escaping links: the link text is copied, never the target's content.
            #[test_case(Plant::TreeWithEscape, Op::Copy("ws/tree", "ws/tree2"), Expect::Ok, Then::Link("ws/tree2/l", "{out}/secret") ; "copy tree with abs escaping link")]
            #[test_case(Plant::TreeWithEscape, Op::Copy("ws/tree", "ws2/tree"), Expect::Ok, Then::Link("ws2/tree/rel", "../../outside/secret") ; "copy tree with rel escaping link")]
            #[test_case(Plant::TreeWithEscape, Op::Remove("ws/tree"), Expect::Ok, Then::Gone("ws/tree") ; "remove tree with escaping links")]
            // Links that stay inside work.
            #[test_case(Plant::InsideLink, Op::Read("ws/inlink"), Expect::Ok, Then::Read(b"sub file") ; "inside link read")]
            #[test_case(Plant::InsideLink, Op::Write("ws/inlink"), Expect::Ok, Then::File("ws/sub/file", WRITTEN) ; "inside link write")]
            #[test_case(Plant::Plain, Op::Read("ws/sub/inner/../file"), Expect::Ok, Then::Read(b"sub file") ; "dotdot staying inside")]
            // A read-only root nested in the read-write one, reached through links in the latter.
            #[test_case(Plant::NestedRo, Op::Read("ws/n/file"), Expect::Ok, Then::Read(b"nested read-only") ; "nested ro read through link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/outer/inner_ro/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro write")]
            #[test_case(Plant::NestedRo, Op::Write("ws/n/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro write through link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/lf"), Expect::Err(PermissionDenied), Then::Link("ws/lf", "outer/inner_ro/file") ; "nested ro write through final link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/f", "ws/lf"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy onto final link")]
            #[test_case(Plant::NestedRo, Op::Write("ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro create through link")]
            #[test_case(Plant::NestedRo, Op::Mkdir("ws/n/new", false), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro mkdir through link")]
            #[test_case(Plant::NestedRo, Op::Mkdir("ws/here/outer/inner_ro/a/b", true), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro mkdir recursive through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/n/file"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro remove through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/n/dir"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro remove dir through link")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/here/outer/inner_ro"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro root remove through alias")]
            #[test_case(Plant::NestedRo, Op::Remove("ws/here/outer"), Expect::Err(PermissionDenied), Then::File("ws/outer/inner_ro/file", b"nested read-only") ; "remove dir holding nested root through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/n/file", "ws/stolen"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro rename out through link")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/f", "ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro rename in through link")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/here/outer/inner_ro", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "nested root rename through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/here/outer", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename dir holding nested root through alias")]
            #[test_case(Plant::NestedRo, Op::Rename("ws/outer", "ws/moved"), Expect::Err(PermissionDenied), Then::Nothing ; "rename dir holding nested root")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/f", "ws/n/new"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy file in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/sub", "ws/n/copied"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy tree in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/here", "ws/n/copied"), Expect::Err(PermissionDenied), Then::Nothing ; "nested ro copy link in through link")]
            #[test_case(Plant::NestedRo, Op::Copy("ws/src", "ws/outer"), Expect::Err(PermissionDenied), Then::Nothing ; "copy tree merging into nested ro root")]
            #[tokio::test]
            async fn hostile(plant_kind: Plant, op: Op<'static>, expect: Expect, then: Then) {
                hostile_case($remote, plant_kind, op, expect, then).await;
            }
        }
    };
}

hostile_table!(local, Backend::Local);

hostile_table!(remote, Backend::Remote);

hostile_table!(relay, Backend::Relay);
