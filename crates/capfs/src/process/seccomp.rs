//! A seccomp filter for processes without the host's network: it refuses to create UNIX
//! sockets, which Landlock (before ABI 9) does not stop from connecting to a socket outside
//! the roots by its path, and refuses io_uring, whose operations seccomp cannot see.
//!
//! Built in the parent (`seccompiler`), installed by the child with one `seccomp` call.
//! Socket pairs (`socketpair`) stay allowed: they reach nothing but each other.

use std::collections::BTreeMap;
use std::io;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The bit x32 system calls carry in their number on x86-64: the same calls again, so they
/// get the same rules.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// The filter: `socket(AF_UNIX, ..)` and `io_uring_setup` fail with `EACCES`; every other
/// call is allowed. A call made under another architecture's convention (32-bit `int 0x80`,
/// whose `socketcall` hides its family in memory) kills the process.
pub(crate) fn no_unix_sockets() -> io::Result<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(refused)?;
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(refused)?;
    let mut rules = BTreeMap::new();
    let mut calls = vec![
        (
            libc::SYS_socket,
            vec![SeccompRule::new(vec![unix]).map_err(refused)?],
        ),
        (libc::SYS_io_uring_setup, Vec::new()),
    ];
    if matches!(arch, TargetArch::x86_64) {
        let x32: Vec<_> = calls
            .iter()
            .map(|(nr, rule)| (nr | X32_SYSCALL_BIT, rule.clone()))
            .collect();
        calls.extend(x32);
    }
    rules.extend(calls);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(refused)?;
    BpfProgram::try_from(filter).map_err(refused)
}

fn refused(err: impl std::fmt::Display) -> io::Error {
    crate::error::seccomp_refused(err)
}
