//! The names of `io::ErrorKind`s: stable text for the kinds capfs reports, the same in an audit
//! line and on the wire, and back.

use std::io;

/// The `io::ErrorKind` values known by name. Any other kind is named `Other`.
const ERROR_KINDS: &[(io::ErrorKind, &str)] = &[
    (io::ErrorKind::NotFound, "NotFound"),
    (io::ErrorKind::PermissionDenied, "PermissionDenied"),
    (io::ErrorKind::AlreadyExists, "AlreadyExists"),
    (io::ErrorKind::IsADirectory, "IsADirectory"),
    (io::ErrorKind::NotADirectory, "NotADirectory"),
    (io::ErrorKind::DirectoryNotEmpty, "DirectoryNotEmpty"),
    (io::ErrorKind::InvalidInput, "InvalidInput"),
    (io::ErrorKind::InvalidData, "InvalidData"),
    (io::ErrorKind::CrossesDevices, "CrossesDevices"),
    (io::ErrorKind::ReadOnlyFilesystem, "ReadOnlyFilesystem"),
    (io::ErrorKind::StorageFull, "StorageFull"),
    (io::ErrorKind::QuotaExceeded, "QuotaExceeded"),
    (io::ErrorKind::FileTooLarge, "FileTooLarge"),
    (io::ErrorKind::InvalidFilename, "InvalidFilename"),
    (io::ErrorKind::TooManyLinks, "TooManyLinks"),
    (io::ErrorKind::ResourceBusy, "ResourceBusy"),
    (io::ErrorKind::ExecutableFileBusy, "ExecutableFileBusy"),
    (io::ErrorKind::BrokenPipe, "BrokenPipe"),
    (io::ErrorKind::TimedOut, "TimedOut"),
    (io::ErrorKind::Interrupted, "Interrupted"),
    (io::ErrorKind::Unsupported, "Unsupported"),
    (io::ErrorKind::UnexpectedEof, "UnexpectedEof"),
    (io::ErrorKind::OutOfMemory, "OutOfMemory"),
    (io::ErrorKind::WouldBlock, "WouldBlock"),
    (io::ErrorKind::ConnectionAborted, "ConnectionAborted"),
    (io::ErrorKind::Other, "Other"),
];

/// The `ELOOP` kind has no stable name to construct it by; it is named `FilesystemLoop`.
const FILESYSTEM_LOOP: &str = "FilesystemLoop";

fn is_filesystem_loop(kind: io::ErrorKind) -> bool {
    kind == io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error()).kind()
}

/// The name of `kind`, as an audit line writes it and the wire carries it.
pub fn kind_name(kind: io::ErrorKind) -> &'static str {
    if is_filesystem_loop(kind) {
        return FILESYSTEM_LOOP;
    }
    ERROR_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("Other", |(_, name)| name)
}

/// The kind named `name` (see [`kind_name`]); `None` for an unknown name.
pub fn kind_of_name(name: &str) -> Option<io::ErrorKind> {
    if name == FILESYSTEM_LOOP {
        return Some(io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error()).kind());
    }
    ERROR_KINDS
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(k, _)| *k)
}

/// Every kind with a name of its own, `FilesystemLoop` last.
pub fn named_kinds() -> impl Iterator<Item = io::ErrorKind> {
    let filesystem_loop = kind_of_name(FILESYSTEM_LOOP).expect("named above");
    ERROR_KINDS
        .iter()
        .map(|(kind, _)| *kind)
        .chain(std::iter::once(filesystem_loop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_kind() {
        for kind in named_kinds() {
            assert_eq!(kind_of_name(kind_name(kind)), Some(kind), "{kind:?}");
        }
        assert_eq!(kind_name(io::ErrorKind::NetworkDown), "Other");
        assert_eq!(kind_of_name("NoSuchKind"), None);
    }
}
