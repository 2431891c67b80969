//! The proxy's two listening sockets (and, with transparent TCP, the DNS responder's socket
//! and a listener per allowed port), made by the child inside the process's network
//! namespace (after `lo` is up, before the program is confined) and handed to the starter
//! over a socket pair the starter made, so that the starter's runtime accepts what the
//! process connects to while its own connections out are made from the host's namespace.
//!
//! The child's half runs between `fork` and `exec`: system calls only, on the stack.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::egress::{
    DNS_ADDRESS, EgressPolicy, HTTP_PROXY_PORT, MAX_TRANSPARENT_PORTS, SOCKS_PROXY_PORT,
};

/// The sockets a process's child made in its network namespace.
#[derive(Debug)]
pub(crate) struct Listeners {
    pub(crate) http: OwnedFd,
    pub(crate) socks: OwnedFd,
    /// Transparent TCP: the DNS responder's UDP socket, and one listener on `0.0.0.0` per
    /// port of [`EgressPolicy::transparent_ports`].
    pub(crate) transparent: Option<(OwnedFd, Vec<OwnedFd>)>,
}

/// The most sockets the child hands over: the two proxies, the DNS responder, and the
/// listeners of transparent TCP.
const MAX_FDS: usize = 3 + MAX_TRANSPARENT_PORTS;

/// The child's end of the socket pair, and what it makes: the proxies' listeners, and with
/// transparent TCP the DNS responder's socket and a listener on each of `ports`.
#[derive(Debug)]
pub(crate) struct ProxyChannel {
    channel: OwnedFd,
    transparent: bool,
    ports: [u16; MAX_TRANSPARENT_PORTS],
    count: usize,
}

/// The ports transparent TCP listens on under `policy` (none without it).
///
/// # Errors
///
/// `InvalidInput` when they are more than [`MAX_TRANSPARENT_PORTS`].
pub(crate) fn transparent_ports(policy: &EgressPolicy) -> io::Result<Vec<u16>> {
    if !policy.transparent_tcp() {
        return Ok(Vec::new());
    }
    let wanted = policy.transparent_ports();
    if wanted.len() > MAX_TRANSPARENT_PORTS {
        return Err(crate::error::too_many_transparent_ports(
            wanted.len(),
            MAX_TRANSPARENT_PORTS,
        ));
    }
    Ok(wanted)
}

/// A socket pair: the starter's end, and the child's, which makes a listener on each of
/// `transparent`'s ports (from [`transparent_ports`]) and the DNS responder's socket when
/// transparent TCP is on.
pub(crate) fn channel(transparent: Option<&[u16]>) -> io::Result<(OwnedFd, ProxyChannel)> {
    let wanted = transparent.unwrap_or_default();
    let mut ports = [0u16; MAX_TRANSPARENT_PORTS];
    let Some(slots) = ports.get_mut(..wanted.len()) else {
        return Err(crate::error::too_many_transparent_ports(
            wanted.len(),
            MAX_TRANSPARENT_PORTS,
        ));
    };
    slots.copy_from_slice(wanted);
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((
        ours,
        ProxyChannel {
            channel: theirs,
            transparent: transparent.is_some(),
            ports,
            count: wanted.len(),
        },
    ))
}

fn listener(address: Ipv4Addr, port: u16) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&socket, &SocketAddrV4::new(address, port))?;
    rustix::net::listen(&socket, 128)?;
    Ok(socket)
}

fn datagram(address: Ipv4Addr, port: u16) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&socket, &SocketAddrV4::new(address, port))?;
    Ok(socket)
}

impl ProxyChannel {
    /// In the child: makes the HTTP and SOCKS listeners on 127.0.0.1 of the current network
    /// namespace (and, with transparent TCP, the DNS responder's socket and the listeners on
    /// `0.0.0.0`) and sends them to the starter, then closes its own copies.
    pub(crate) fn send_listeners(&self) -> io::Result<()> {
        let http = listener(Ipv4Addr::LOCALHOST, HTTP_PROXY_PORT)?;
        let socks = listener(Ipv4Addr::LOCALHOST, SOCKS_PROXY_PORT)?;
        let mut made: [Option<OwnedFd>; MAX_FDS] = [const { None }; MAX_FDS];
        let mut n = 0;
        if self.transparent {
            made[0] = Some(datagram(DNS_ADDRESS, 53)?);
            n = 1;
            for port in &self.ports[..self.count] {
                made[n] = Some(listener(Ipv4Addr::UNSPECIFIED, *port)?);
                n += 1;
            }
        }
        let mut fds: [BorrowedFd<'_>; MAX_FDS] = [http.as_fd(); MAX_FDS];
        fds[1] = socks.as_fd();
        for (slot, fd) in fds[2..].iter_mut().zip(made.iter().flatten()) {
            *slot = fd.as_fd();
        }
        send_descriptors(&self.channel, &fds[..2 + n])
    }
}

/// Sends `fds` (at most [`MAX_FDS`]) on `channel` with one byte, from buffers on the stack:
/// a child may call it between `fork` and `exec`.
pub(crate) fn send_descriptors(channel: &OwnedFd, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(rustix::io::Errno::NOBUFS.into());
    }
    let byte = [1u8];
    rustix::net::sendmsg(
        channel,
        &[IoSlice::new(&byte)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// The descriptors sent on `channel` by [`send_descriptors`], in their order; `flags` say
/// whether to wait for them.
pub(crate) fn receive_descriptors(channel: &OwnedFd, flags: RecvFlags) -> io::Result<Vec<OwnedFd>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        channel,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        flags | RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    Ok(fds)
}

/// In the starter, once the child runs: the sockets it sent for `policy`.
pub(crate) fn receive(channel: &OwnedFd, policy: &EgressPolicy) -> io::Result<Listeners> {
    let fds = receive_descriptors(channel, RecvFlags::DONTWAIT)?;
    let missing = || io::Error::other("the process did not hand over its proxy sockets");
    let mut fds = fds.into_iter();
    let http = fds.next().ok_or_else(missing)?;
    let socks = fds.next().ok_or_else(missing)?;
    let transparent = match policy.transparent_tcp() {
        false => None,
        true => {
            let dns = fds.next().ok_or_else(missing)?;
            let ports: Vec<OwnedFd> = fds.collect();
            if ports.len() != policy.transparent_ports().len() {
                return Err(missing());
            }
            Some((dns, ports))
        }
    };
    Ok(Listeners {
        http,
        socks,
        transparent,
    })
}
