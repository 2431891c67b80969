//! A pseudo-terminal for a process that asked for one: the parent keeps the non-blocking
//! controller side, the child gets the terminal side as its standard input, output and error.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;

use super::TerminalSize;
use super::policy::RunAs;

/// Both sides of a new terminal.
#[derive(Debug)]
pub(crate) struct Pty {
    /// The controller side, non-blocking, for the parent.
    pub controller: OwnedFd,
    /// The terminal side, for the child.
    pub terminal: OwnedFd,
}

/// Opens a terminal of `size`, its terminal side owned by `owner` when one is given (so that
/// programs that check who owns their terminal accept it).
pub(crate) fn open(size: TerminalSize, owner: Option<RunAs>) -> io::Result<Pty> {
    let controller = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
    rustix::pty::grantpt(&controller)?;
    rustix::pty::unlockpt(&controller)?;
    let name = rustix::pty::ptsname(&controller, Vec::new())?;
    let terminal = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if let Some(owner) = owner {
        rustix::fs::fchown(
            &terminal,
            Some(rustix::fs::Uid::from_raw(owner.uid)),
            Some(rustix::fs::Gid::from_raw(owner.gid)),
        )?;
    }
    resize(&controller, size)?;
    let flags = rustix::fs::fcntl_getfl(&controller)?;
    rustix::fs::fcntl_setfl(&controller, flags | OFlags::NONBLOCK)?;
    rustix::io::fcntl_setfd(&controller, rustix::io::FdFlags::CLOEXEC)?;
    Ok(Pty {
        controller,
        terminal,
    })
}

/// Tells the terminal its size (the kernel signals the foreground group with `SIGWINCH`).
pub(crate) fn resize(controller: impl AsFd, size: TerminalSize) -> io::Result<()> {
    rustix::termios::tcsetwinsize(
        controller,
        Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    Ok(())
}
