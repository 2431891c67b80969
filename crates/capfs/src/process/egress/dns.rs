//! The DNS responder of transparent TCP, on UDP port 53 of a process's own loopback: it
//! answers an `A` query for a name the policy allows with an address of the synthetic range,
//! remembered for the process, and every other name with `NXDOMAIN`. It never asks anyone:
//! a query leaves no trace outside the process's namespace, whatever name it carries.

use std::net::Ipv4Addr;
use std::sync::Arc;

use tokio::net::UdpSocket;

use super::rules::normal_name;
use super::session::Session;

/// What the answers' records say of how long to keep them, in seconds.
const TTL: u32 = 300;

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
const SERVFAIL: u8 = 2;
const NXDOMAIN: u8 = 3;
const NOTIMP: u8 = 4;
const REFUSED: u8 = 5;

/// Answers the queries `socket` receives, one at a time, until the task is aborted.
pub(crate) async fn serve(socket: UdpSocket, session: Arc<Session>) {
    let mut buf = [0u8; 1500];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            tokio::task::yield_now().await;
            continue;
        };
        if let Some(reply) = answer(&buf[..n], &session) {
            let _ = socket.send_to(&reply, from).await;
        }
    }
}

/// The reply to `query`; `None` for what is not a query (no reply at all).
fn answer(query: &[u8], session: &Session) -> Option<Vec<u8>> {
    decide(query, |name| {
        let allowed = session
            .policy
            .answers(name, &session.ports, &session.narrowing);
        if !allowed {
            return Err(NXDOMAIN);
        }
        let mut names = session.names.lock().unwrap_or_else(|e| e.into_inner());
        names.address_of(name).ok_or(SERVFAIL)
    })
}

/// What a query asks and the reply to it, with `lookup` giving a name's address or the code
/// to answer instead (`lookup` is asked for the names of `A` and of other `IN` queries).
fn decide(query: &[u8], lookup: impl FnOnce(&str) -> Result<Ipv4Addr, u8>) -> Option<Vec<u8>> {
    if query.len() < 12 || query[2] & 0x80 != 0 {
        // Too short to reply to, or a response.
        return None;
    }
    let opcode = (query[2] >> 3) & 0x0f;
    let questions = u16::from_be_bytes([query[4], query[5]]);
    if opcode != 0 {
        return Some(reply(query, 12, NOTIMP, None));
    }
    if questions != 1 {
        return Some(reply(query, 12, FORMERR, None));
    }
    let Some((name, end)) = question_name(query) else {
        return Some(reply(query, 12, FORMERR, None));
    };
    let Some(fixed) = query.get(end..end + 4) else {
        return Some(reply(query, 12, FORMERR, None));
    };
    let end = end + 4;
    let qtype = u16::from_be_bytes([fixed[0], fixed[1]]);
    let qclass = u16::from_be_bytes([fixed[2], fixed[3]]);
    if qclass != CLASS_IN {
        return Some(reply(query, end, REFUSED, None));
    }
    let Some(name) = name.as_deref().and_then(normal_name) else {
        return Some(reply(query, end, NXDOMAIN, None));
    };
    Some(match lookup(&name) {
        // A name that exists, asked for another type (AAAA, MX...): no record of it.
        Ok(addr) if qtype == TYPE_A => reply(query, end, NOERROR, Some(addr)),
        Ok(_) => reply(query, end, NOERROR, None),
        Err(code) => reply(query, end, code, None),
    })
}

/// The question's name as text (`None` when a label is not ASCII) and where the name ends;
/// `None` for a malformed or compressed name.
fn question_name(query: &[u8]) -> Option<(Option<String>, usize)> {
    let mut at = 12;
    let mut name = String::new();
    let mut ascii = true;
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            // A compression pointer, or a reserved label type: not in a question.
            return None;
        }
        let label = query.get(at..at + len)?;
        at += len;
        if name.len() + len + 1 > 255 {
            return None;
        }
        if !name.is_empty() {
            name.push('.');
        }
        ascii &= label.is_ascii() && !label.contains(&b'.');
        name.extend(label.iter().map(|b| char::from(*b)));
    }
    Some((ascii.then_some(name), at))
}

/// A reply to `query` with its question (the bytes up to `end`), `code`, and an `A` record of
/// `addr` for the question's name.
fn reply(query: &[u8], end: usize, code: u8, addr: Option<Ipv4Addr>) -> Vec<u8> {
    let mut out = Vec::with_capacity(end + 16);
    out.extend_from_slice(&query[..2]);
    // QR, the query's opcode, authoritative, its recursion-desired bit; no recursion
    // available.
    out.push(0x80 | (query[2] & 0x78) | 0x04 | (query[2] & 0x01));
    out.push(code);
    let questions: u16 = if end > 12 { 1 } else { 0 };
    out.extend_from_slice(&questions.to_be_bytes());
    out.extend_from_slice(&u16::from(addr.is_some()).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&query[12..end]);
    if let Some(addr) = addr {
        // The question's name by a pointer to offset 12.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&TTL.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&addr.octets());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    fn allow_web(name: &str) -> Result<Ipv4Addr, u8> {
        match name {
            "web.test" => Ok(Ipv4Addr::new(198, 18, 0, 1)),
            _ => Err(NXDOMAIN),
        }
    }

    #[test]
    fn an_allowed_name_gets_one_synthetic_a_record_and_nothing_else_an_address() {
        let q = query("Web.Test", TYPE_A);
        let r = decide(&q, allow_web).unwrap();
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert_eq!(r[3] & 0x0f, NOERROR);
        assert_eq!(&r[6..8], &[0, 1]);
        assert_eq!(&r[12..q.len()], &q[12..]);
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 1]);
        // AAAA of an allowed name: no record, no error.
        let r = decide(&query("web.test", 28), allow_web).unwrap();
        assert_eq!((r[3], &r[6..8]), (NOERROR, &[0u8, 0][..]));
        let r = decide(&query("other.test", TYPE_A), allow_web).unwrap();
        assert_eq!((r[3], &r[6..8]), (NXDOMAIN, &[0u8, 0][..]));
    }

    #[test]
    fn responses_and_malformed_queries_get_no_address() {
        let mut q = query("web.test", TYPE_A);
        q[2] |= 0x80;
        assert!(decide(&q, allow_web).is_none());
        assert!(decide(&q[..5], allow_web).is_none());
        let q = query("web.test", TYPE_A);
        assert_eq!(decide(&q[..q.len() - 2], allow_web).unwrap()[3], FORMERR);
        let mut pointer = q[..12].to_vec();
        pointer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
        assert_eq!(decide(&pointer, allow_web).unwrap()[3], FORMERR);
        let mut chaos = q.clone();
        let at = chaos.len() - 1;
        chaos[at] = 3;
        assert_eq!(decide(&chaos, allow_web).unwrap()[3], REFUSED);
        let mut inner_dot = q[..12].to_vec();
        inner_dot.extend_from_slice(b"\x08web.test\x00\x00\x01\x00\x01");
        assert_eq!(decide(&inner_dot, allow_web).unwrap()[3], NXDOMAIN);
    }
}
