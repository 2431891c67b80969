//! The maps of a process's new user namespace: the starter's own user and group, each mapped
//! to itself, written by the child between `fork` and `exec` (from buffers the parent filled).

use std::io;

use rustix::io::Errno;

/// The contents of `/proc/self/uid_map` and `gid_map` that map one id to itself.
#[derive(Debug)]
pub(crate) struct IdMaps {
    uid_map: [u8; 40],
    uid_len: usize,
    gid_map: [u8; 40],
    gid_len: usize,
}

impl IdMaps {
    /// The maps of the caller's effective user and group.
    pub(crate) fn of_current() -> Self {
        let line = |id: u32| {
            let text = format!("{id} {id} 1\n");
            let mut bytes = [0u8; 40];
            bytes[..text.len()].copy_from_slice(text.as_bytes());
            (bytes, text.len())
        };
        let (uid_map, uid_len) = line(rustix::process::geteuid().as_raw());
        let (gid_map, gid_len) = line(rustix::process::getegid().as_raw());
        Self {
            uid_map,
            uid_len,
            gid_map,
            gid_len,
        }
    }

    /// Writes the maps of the caller's new user namespace (groups cannot be changed there).
    /// A server that became its user from root is not dumpable, so its `/proc/self` files are
    /// root's: the child is dumpable for these three writes only, and the program's `exec`
    /// then sets the flag as for any program.
    pub(crate) fn write(&self) -> io::Result<()> {
        use rustix::process::DumpableBehavior;
        let was = rustix::process::dumpable_behavior()?;
        if was != DumpableBehavior::Dumpable {
            rustix::process::set_dumpable_behavior(DumpableBehavior::Dumpable)?;
        }
        let written = write_proc(c"/proc/self/setgroups", b"deny")
            .and_then(|()| write_proc(c"/proc/self/uid_map", &self.uid_map[..self.uid_len]))
            .and_then(|()| write_proc(c"/proc/self/gid_map", &self.gid_map[..self.gid_len]));
        if was != DumpableBehavior::Dumpable {
            rustix::process::set_dumpable_behavior(was)?;
        }
        written
    }
}

fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    if rustix::io::write(&fd, bytes)? != bytes.len() {
        return Err(Errno::IO.into());
    }
    Ok(())
}
