//! A file being filled by a streamed write: owned (no borrow of its directory), so that each
//! batch of data can be written by a separate call on the blocking pool while the chunks in
//! between are awaited on an async task.
//!
//! Like `replace_file`, the file has no name while it is filled (O_TMPFILE) and is moved over
//! its target by a rename; a write that fails or is dropped leaves the target as it was and
//! nothing behind. Where O_TMPFILE is not offered, the file is created under a random name in
//! the target's directory and removed when the write does not complete.

use std::ffi::{OsStr, OsString};
use std::fs::{File, FileTimes};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cap_std::fs::Dir;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::file_system::WriteOptions;
use crate::sandbox::{EXT4_MAGIC, XFS_MAGIC, file_system_magic};

/// Permission bits a write may give a file: setuid, setgid and sticky never come through.
const PERMISSION_BITS: u32 = 0o777;

/// The least size whose blocks a write reserves before it writes them: below it, the call
/// costs more than it saves.
const PREALLOCATE_FROM: u64 = 1 << 20;

/// How far past the bytes it has received a streamed write's blocks are reserved: as far as
/// its announced size, but never more than this ahead, so that a write announcing more than
/// it sends holds no more of the disk than this beyond what it sent.
const PREALLOCATE_AHEAD: u64 = 32 << 20;

/// The file systems, by `f_type`, where a write into reserved blocks is a plain write: ext4
/// (with ext2 and ext3, which share its number) and XFS. Elsewhere a reservation can change how
/// the file is stored (Btrfs writes into it in place, uncompressed) or take memory before the
/// data comes (tmpfs), so nothing is reserved there.
const RESERVING_FILE_SYSTEMS: [u64; 2] = [EXT4_MAGIC, XFS_MAGIC];

/// Whether `file` is on one of the [`RESERVING_FILE_SYSTEMS`].
fn reserves_blocks(file: &impl AsFd) -> bool {
    file_system_magic(file).is_some_and(|magic| RESERVING_FILE_SYSTEMS.contains(&magic))
}

/// Reserves the blocks of `file` from `from` to `to` (its size unchanged: the writes that
/// follow set it), so that the writes into them need no allocation of their own; on ext4,
/// a 256 MiB streamed write then took about a fifth less of the server's CPU. Says whether the
/// file system did it: one that cannot (`EOPNOTSUPP`, `EINVAL`) or has no room (the writes
/// then fail on their own, as without it) is not asked again.
fn preallocate(file: &impl AsFd, from: u64, to: u64) -> bool {
    let flags = rustix::fs::FallocateFlags::KEEP_SIZE;
    to <= from || rustix::fs::fallocate(file, flags, from, to - from).is_ok()
}

/// Reserves the blocks of the `size` bytes an empty `file` is about to be given at once
/// (`write_file`'s contents), when that is at least [`PREALLOCATE_FROM`] on a
/// [`RESERVING_FILE_SYSTEMS`] member.
pub(crate) fn preallocate_whole(file: &impl AsFd, size: u64) {
    if size >= PREALLOCATE_FROM && reserves_blocks(file) {
        preallocate(file, 0, size);
    }
}

/// A file being written, not yet visible under its name.
pub(crate) struct StagedFile {
    parent: Dir,
    target: OsString,
    file: File,
    /// The random name of the file where O_TMPFILE is not offered; removed on drop.
    name: Option<OsString>,
    /// Permission bits to give the file: the existing file's, when there was one.
    keep_mode: Option<u32>,
    /// The owner and group to give the file: the existing file's, when there was one.
    keep_owner: Option<(u32, u32)>,
    /// Nothing had the target's name when the write started: the commit first tries to link
    /// the file under it directly.
    name_is_free: bool,
    /// The size the write announced, while the file system reserves blocks for it.
    announced: Option<u64>,
    /// Bytes written so far.
    written: u64,
    /// Bytes whose blocks are reserved from the start.
    reserved: u64,
}

impl std::fmt::Debug for StagedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedFile").finish_non_exhaustive()
    }
}

impl StagedFile {
    /// A new empty file in `parent`, to replace `target` there once complete. `keep_mode` are
    /// the permission bits of the file it replaces, if any, and `keep_owner` its owner and
    /// group; `name_is_free` says nothing had the name when the write started.
    pub(crate) fn new(
        parent: Dir,
        target: &OsStr,
        keep_mode: Option<u32>,
        keep_owner: Option<(u32, u32)>,
        name_is_free: bool,
    ) -> io::Result<Self> {
        let flags = OFlags::CLOEXEC | OFlags::TMPFILE | OFlags::WRONLY;
        let (file, name) = match rustix::fs::openat(&parent, ".", flags, Mode::from_raw_mode(0o666))
        {
            Ok(fd) => (File::from(fd), None),
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::NOENT) => {
                let flags = OFlags::CLOEXEC | OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY;
                let (fd, name) = with_random_name(|name| {
                    rustix::fs::openat(&parent, name, flags, Mode::from_raw_mode(0o666))
                })?;
                (File::from(fd), Some(name))
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Self {
            parent,
            target: target.to_os_string(),
            file,
            name,
            keep_mode,
            keep_owner,
            name_is_free,
            announced: None,
            written: 0,
            reserved: 0,
        })
    }

    /// The write says it will hold `size` bytes: blocks are reserved ahead of its data (at
    /// most [`PREALLOCATE_AHEAD`] past it) when that is at least [`PREALLOCATE_FROM`] on a
    /// [`RESERVING_FILE_SYSTEMS`] member.
    pub(crate) fn announce(&mut self, size: Option<u64>) {
        self.announced =
            size.filter(|&size| size >= PREALLOCATE_FROM && reserves_blocks(&self.file));
    }

    /// Appends `data`.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<()> {
        let end = self.written.saturating_add(data.len() as u64);
        if let Some(size) = self.announced
            && end > self.reserved
        {
            let to = end.saturating_add(PREALLOCATE_AHEAD).min(size).max(end);
            if preallocate(&self.file, self.reserved, to) {
                self.reserved = to;
            } else {
                self.announced = None;
            }
        }
        self.file.write_all(data)?;
        self.written = end;
        Ok(())
    }

    /// Applies `options` and moves the file over its target.
    pub(crate) fn commit(mut self, options: WriteOptions) -> io::Result<()> {
        // The owner first: a change of owner clears the bits the mode then sets.
        keep_owner(&self.file, self.keep_owner)?;
        let mode = options.mode.or(self.keep_mode);
        if let Some(mode) = mode {
            let permissions = std::fs::Permissions::from_mode(mode & PERMISSION_BITS);
            self.file.set_permissions(permissions)?;
        }
        if let Some(ms) = options.modified_at_ms {
            self.file
                .set_times(FileTimes::new().set_modified(system_time(ms)))?;
        }
        let name = match self.name.take() {
            Some(name) => name,
            None if self.name_is_free && link_as_new(&self.file, &self.parent, &self.target) => {
                return Ok(());
            }
            None => self.link_anonymous()?,
        };
        rustix::fs::renameat(&self.parent, &name, &self.parent, &self.target).map_err(|e| {
            // Dropping `self` with the name set removes the file.
            self.name = Some(name);
            io::Error::from(e)
        })
    }

    /// Gives the nameless file a random name in its directory (Linux cannot rename a nameless
    /// file over another).
    fn link_anonymous(&self) -> io::Result<OsString> {
        let (_, name) = with_random_name(|name| link_by_fd(&self.file, &self.parent, name))?;
        Ok(name)
    }
}

/// Gives `file` the owner and group `owner`, when it has other ones: a replacement keeps the
/// owner of what it replaces. A process that may not give them (not root, and not the owner,
/// or not in the group) fails with `PermissionDenied`, and the replace does not happen.
pub(crate) fn keep_owner(file: &impl AsFd, owner: Option<(u32, u32)>) -> io::Result<()> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    let stat = rustix::fs::fstat(file)?;
    if stat.st_uid == uid && stat.st_gid == gid {
        return Ok(());
    }
    let new_uid = (stat.st_uid != uid).then(|| rustix::fs::Uid::from_raw(uid));
    let new_gid = (stat.st_gid != gid).then(|| rustix::fs::Gid::from_raw(gid));
    rustix::fs::fchown(file, new_uid, new_gid).map_err(|e| match e {
        Errno::PERM => crate::error::owner_not_kept(uid, gid),
        e => e.into(),
    })
}

/// Links the nameless `file` (or one with a temporary name) into `parent` as `name` when no
/// entry has that name: the file appears whole under its name in one step, with no temporary
/// name and no rename. False when `name` exists, or when the file cannot be linked this way
/// (no procfs); the caller then renames over `name`, which reports any error that is real.
pub(crate) fn link_as_new(file: &impl AsFd, parent: &Dir, name: &OsStr) -> bool {
    link_by_fd(file, parent, name).is_ok()
}

/// Links the open `file` into `parent` as `name` through its `/proc/self/fd` entry (the only
/// way to name an O_TMPFILE file without privileges); fails with `EEXIST` if `name` exists.
fn link_by_fd(file: &impl AsFd, parent: &Dir, name: &OsStr) -> rustix::io::Result<()> {
    let proc_self_fd = rustix_linux_procfs::proc_self_fd()?;
    let fd = rustix::path::DecInt::from_fd(file.as_fd());
    rustix::fs::linkat(
        proc_self_fd,
        fd.as_c_str(),
        parent,
        name,
        AtFlags::SYMLINK_FOLLOW,
    )
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = rustix::fs::unlinkat(&self.parent, &name, AtFlags::empty());
        }
    }
}

/// A time `ms` milliseconds from the Unix epoch (negative: before it).
fn system_time(ms: i64) -> SystemTime {
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + offset
    } else {
        UNIX_EPOCH - offset
    }
}

/// Runs `f` with fresh names until one is not taken.
fn with_random_name<T>(
    mut f: impl FnMut(&OsStr) -> rustix::io::Result<T>,
) -> io::Result<(T, OsString)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for _ in 0..64 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = OsString::from(format!(
            ".capfs-{}-{n:x}-{nanos:08x}.tmp",
            std::process::id()
        ));
        match f(&name) {
            Ok(value) => return Ok((value, name)),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(crate::error::too_many_temporaries())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    /// A new name gets the file by a link; an existing one keeps its content until the rename
    /// replaces it; no temporary name is left either way.
    #[test]
    fn commits_link_new_names_and_rename_over_existing_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let open = || Dir::open_ambient_dir(tmp.path(), ambient_authority()).unwrap();
        let mut staged = StagedFile::new(open(), OsStr::new("new"), None, None, true).unwrap();
        staged.write(b"first").unwrap();
        // Not linkable under a name that is taken, which keeps its content.
        std::fs::write(tmp.path().join("taken"), b"old").unwrap();
        assert!(!link_as_new(&staged.file, &open(), OsStr::new("taken")));
        assert_eq!(std::fs::read(tmp.path().join("taken")).unwrap(), b"old");
        staged.commit(WriteOptions::default()).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("new")).unwrap(), b"first");

        let mut staged = StagedFile::new(open(), OsStr::new("taken"), None, None, false).unwrap();
        staged.write(b"second").unwrap();
        staged.commit(WriteOptions::default()).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("taken")).unwrap(), b"second");

        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["new", "taken"]);
    }

    /// A write that announces its size has its blocks reserved ahead of its data, never more
    /// than `PREALLOCATE_AHEAD` past it nor past the size, and the file holds what was
    /// written, no longer.
    #[test]
    fn blocks_are_reserved_ahead_of_a_write_within_their_bound() {
        use std::os::unix::fs::MetadataExt;
        const MIB: u64 = 1 << 20;
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority()).unwrap();
        let mut staged = StagedFile::new(dir, OsStr::new("big"), None, None, true).unwrap();
        let announced = 2 * PREALLOCATE_AHEAD;
        staged.announce(Some(announced));
        let chunk = |index: u64| vec![u8::try_from(index % 251).unwrap(); MIB as usize];
        staged.write(&chunk(0)).unwrap();
        let after_one = staged.file.metadata().unwrap();
        assert_eq!(
            after_one.len(),
            MIB,
            "the reservation changed the file's size"
        );
        // The blocks held: what was written, the reservation, and a MiB for the file
        // system's rounding.
        let held = |metadata: &std::fs::Metadata| metadata.blocks() * 512;
        assert!(
            held(&after_one) <= MIB + PREALLOCATE_AHEAD + MIB,
            "{} bytes held after 1 MiB was written",
            held(&after_one)
        );
        // On ext4 and XFS the blocks run ahead of the data; elsewhere none are reserved.
        if reserves_blocks(&staged.file) {
            assert_eq!(staged.reserved, MIB + PREALLOCATE_AHEAD);
            assert!(held(&after_one) >= MIB + PREALLOCATE_AHEAD);
        } else {
            assert_eq!(staged.reserved, 0);
        }
        for index in 1..announced / MIB {
            staged.write(&chunk(index)).unwrap();
        }
        assert!(
            staged.reserved <= announced,
            "reserved past the announced size"
        );
        staged.commit(WriteOptions::default()).unwrap();
        let written = std::fs::read(tmp.path().join("big")).unwrap();
        assert_eq!(written.len() as u64, announced);
        for (index, piece) in written.chunks(MIB as usize).enumerate() {
            assert_eq!(piece, chunk(index as u64), "MiB {index} differs");
        }
    }

    /// Nothing is reserved for a write below `PREALLOCATE_FROM` or of no announced size, nor
    /// on tmpfs, where a reservation would take memory before the data comes.
    #[test]
    fn small_unsized_and_tmpfs_writes_reserve_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let shm = std::path::Path::new("/dev/shm");
        let memory = shm
            .is_dir()
            .then(|| tempfile::tempdir_in(shm).ok())
            .flatten();
        let mut cases = vec![
            (tmp.path(), "small", Some(PREALLOCATE_FROM - 1)),
            (tmp.path(), "unsized", None),
        ];
        if let Some(memory) = &memory {
            cases.push((memory.path(), "tmpfs", Some(4 * PREALLOCATE_FROM)));
        }
        for (path, name, size) in cases {
            let dir = Dir::open_ambient_dir(path, ambient_authority()).unwrap();
            let mut staged = StagedFile::new(dir, OsStr::new(name), None, None, true).unwrap();
            staged.announce(size);
            staged.write(b"data").unwrap();
            assert_eq!(staged.reserved, 0, "{name}");
        }
    }
}
