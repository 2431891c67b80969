//! The server name of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3), read without any
//! handshake: the handshake message is gathered from its records, walked field by field with
//! every length checked, and anything unexpected is refused rather than guessed at.

/// The largest ClientHello taken (its handshake message, gathered from its records).
pub(crate) const MAX_HELLO: usize = 64 * 1024;

const RECORD_HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const EXTENSION_SERVER_NAME: u16 = 0;
/// `encrypted_client_hello`: the name the client means is hidden behind the outer one.
const EXTENSION_ECH: u16 = 0xfe0d;
const NAME_TYPE_HOST: u8 = 0;

/// What the bytes so far hold: not yet a whole ClientHello, or one with its server name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    Incomplete,
    Complete(Option<String>),
}

/// Reads the ClientHello at the start of `bytes` (what the client sent first).
pub(crate) fn parse(bytes: &[u8]) -> Result<Hello, String> {
    let mut message = Vec::new();
    let mut rest = bytes;
    loop {
        if rest.len() < 5 {
            return Ok(Hello::Incomplete);
        }
        if rest[0] != RECORD_HANDSHAKE || rest[1] != 3 {
            return Err("not a TLS handshake record".into());
        }
        let length = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if length == 0 || length > 16 * 1024 + 256 {
            return Err("a TLS record of a size no ClientHello has".into());
        }
        if rest.len() < 5 + length {
            return Ok(Hello::Incomplete);
        }
        message.extend_from_slice(&rest[5..5 + length]);
        rest = &rest[5 + length..];
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return Err("the first handshake message is not a ClientHello".into());
            }
            let size = u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if size > MAX_HELLO {
                return Err("the TLS ClientHello is too large".into());
            }
            if message.len() >= 4 + size {
                return server_name(&message[4..4 + size]).map(Hello::Complete);
            }
        }
    }
}

/// A cursor that refuses to read past its end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("a truncated TLS ClientHello".into());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn number(&mut self, width: usize) -> Result<usize, String> {
        Ok(self
            .take(width)?
            .iter()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b)))
    }

    /// A field preceded by its length in `width` bytes.
    fn vector(&mut self, width: usize) -> Result<Fields<'a>, String> {
        let n = self.number(width)?;
        self.take(n).map(Fields)
    }
}

fn server_name(body: &[u8]) -> Result<Option<String>, String> {
    let mut hello = Fields(body);
    hello.take(2 + 32)?; // legacy version, random
    hello.vector(1)?; // legacy session id
    hello.vector(2)?; // cipher suites
    hello.vector(1)?; // compression methods
    if hello.0.is_empty() {
        return Ok(None);
    }
    let mut extensions = hello.vector(2)?;
    let mut name = None;
    let mut seen = std::collections::BTreeSet::new();
    while !extensions.0.is_empty() {
        let kind = extensions.number(2)? as u16;
        let mut data = extensions.vector(2)?;
        if !seen.insert(kind) {
            return Err("a TLS ClientHello with a repeated extension".into());
        }
        match kind {
            EXTENSION_ECH => {
                return Err("an encrypted ClientHello hides the server it names".into());
            }
            EXTENSION_SERVER_NAME => {
                let mut list = data.vector(2)?;
                while !list.0.is_empty() {
                    let name_type = list.take(1)?[0];
                    let host = list.vector(2)?.0;
                    if name_type != NAME_TYPE_HOST {
                        continue;
                    }
                    if name.is_some() {
                        return Err("a TLS ClientHello naming two servers".into());
                    }
                    let host = std::str::from_utf8(host)
                        .ok()
                        .filter(|h| h.is_ascii() && !h.is_empty())
                        .ok_or("a TLS server name that is not a host name")?;
                    name = Some(host.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello with `extensions`, in one handshake message.
    fn hello(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
        let mut ext = Vec::new();
        for (kind, data) in extensions {
            ext.extend(kind.to_be_bytes());
            ext.extend((data.len() as u16).to_be_bytes());
            ext.extend(data);
        }
        body.extend((ext.len() as u16).to_be_bytes());
        body.extend(ext);
        let mut message = vec![CLIENT_HELLO];
        message.extend(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend(body);
        message
    }

    fn sni(names: &[&str]) -> (u16, Vec<u8>) {
        let mut list = Vec::new();
        for name in names {
            list.push(NAME_TYPE_HOST);
            list.extend((name.len() as u16).to_be_bytes());
            list.extend(name.as_bytes());
        }
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        (EXTENSION_SERVER_NAME, data)
    }

    /// `message` in records of at most `size` bytes.
    fn records(message: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in message.chunks(size) {
            out.extend([RECORD_HANDSHAKE, 3, 1]);
            out.extend((chunk.len() as u16).to_be_bytes());
            out.extend(chunk);
        }
        out
    }

    #[test]
    fn the_server_name_is_read_across_records_and_partial_reads() {
        let bytes = records(&hello(&[(10, vec![0, 2, 0, 29]), sni(&["pypi.org"])]), 20);
        assert_eq!(parse(&bytes), Ok(Hello::Complete(Some("pypi.org".into()))));
        for cut in [0, 3, 5, 30, bytes.len() - 1] {
            assert_eq!(parse(&bytes[..cut]), Ok(Hello::Incomplete), "{cut}");
        }
        assert_eq!(parse(&records(&hello(&[]), 512)), Ok(Hello::Complete(None)));
    }

    #[test]
    fn what_could_hide_or_confuse_the_name_is_refused() {
        for bytes in [
            records(&hello(&[sni(&["a.test", "b.test"])]), 512),
            records(&hello(&[sni(&["a.test"]), sni(&["b.test"])]), 512),
            records(
                &hello(&[sni(&["a.test"]), (EXTENSION_ECH, vec![0; 8])]),
                512,
            ),
            records(&hello(&[sni(&[""])]), 512),
            b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n".to_vec(),
            records(&[2, 0, 0, 0], 512),
        ] {
            assert!(parse(&bytes).is_err(), "{bytes:?}");
        }
        let mut truncated = hello(&[sni(&["a.test"])]);
        truncated[3] -= 4; // a message shorter than its fields say
        assert!(parse(&records(&truncated, 512)).is_err());
    }
}
