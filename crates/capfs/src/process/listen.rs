//! The proxy's two listening sockets, made by the child inside the process's network
//! namespace (after `lo` is up, before the program is confined) and handed to the starter
//! over a socket pair the starter made, so that the starter's runtime accepts what the
//! process connects to while its own connections out are made from the host's namespace.
//!
//! The child's half runs between `fork` and `exec`: system calls only, on the stack.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::egress::{HTTP_PROXY_PORT, SOCKS_PROXY_PORT};

/// The child's end of the socket pair.
#[derive(Debug)]
pub(crate) struct ProxyChannel(OwnedFd);

/// A socket pair: the starter's end, and the child's.
pub(crate) fn channel() -> io::Result<(OwnedFd, ProxyChannel)> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((ours, ProxyChannel(theirs)))
}

fn listener(port: u16) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&socket, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    rustix::net::listen(&socket, 128)?;
    Ok(socket)
}

impl ProxyChannel {
    /// In the child: makes the HTTP and SOCKS listeners on 127.0.0.1 of the current network
    /// namespace and sends them to the starter, then closes its own copies.
    pub(crate) fn send_listeners(&self) -> io::Result<()> {
        let http = listener(HTTP_PROXY_PORT)?;
        let socks = listener(SOCKS_PROXY_PORT)?;
        let fds = [http.as_fd(), socks.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(rustix::io::Errno::NOBUFS.into());
        }
        let byte = [1u8];
        rustix::net::sendmsg(
            &self.0,
            &[IoSlice::new(&byte)],
            &mut control,
            SendFlags::empty(),
        )?;
        Ok(())
    }
}

/// In the starter, once the child runs: the two listeners it sent, HTTP first.
pub(crate) fn receive(channel: &OwnedFd) -> io::Result<[OwnedFd; 2]> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        channel,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    let missing = || io::Error::other("the process did not hand over its proxy sockets");
    let mut fds = fds.into_iter();
    let http = fds.next().ok_or_else(missing)?;
    let socks = fds.next().ok_or_else(missing)?;
    Ok([http, socks])
}
