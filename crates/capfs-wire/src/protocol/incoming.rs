//! A message as a server reads it: in one pass over its text, without a `Value` of the whole,
//! and a request's params decoded in that same pass straight into the type of its method's
//! params, when the method comes before them (as every client writes it). Otherwise the params
//! stay their JSON text, decoded once, later, by whoever runs the method.
//!
//! What the reading accepts and refuses is what [`Message::from_slice`] does, with its error
//! messages. Skipping a value (a member no one reads) is laxer than decoding it, so every value
//! no one reads is checked instead (`checked.rs`): the message's other members as they are
//! passed, the params' through [`Strict`], and params kept as text with the whole message
//! before they are taken.

use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::checked::{Checked, Strict};
use super::{Message, RequestId};

/// A request's params as the server has them from reading its message.
#[derive(Debug)]
pub(crate) enum RequestParams<D> {
    /// Absent, or `null`.
    Absent,
    /// Decoded in the message's own pass, by the seed its method gave.
    Decoded(D),
    /// Their JSON text, to be decoded by whoever runs the method.
    Text(Box<RawValue>),
}

impl<D> RequestParams<D> {
    /// The params' text, where they have one.
    pub(crate) fn text(&self) -> Option<&RawValue> {
        match self {
            RequestParams::Text(raw) => Some(raw),
            RequestParams::Absent | RequestParams::Decoded(_) => None,
        }
    }
}

/// A message as the server reads it; `D` is what a method's seed decodes params into.
#[derive(Debug)]
pub(crate) enum Incoming<D> {
    Request {
        id: RequestId,
        method: String,
        params: RequestParams<D>,
    },
    Notification {
        method: String,
    },
    /// A response or an error response.
    Reply,
}

impl<D> Incoming<D> {
    /// Reads one message. `seed_for(method)` is the seed that decodes the params of `method`,
    /// for a method the server knows.
    pub(crate) fn read<S>(
        bytes: &[u8],
        seed_for: impl Fn(&str) -> Option<S>,
    ) -> serde_json::Result<Self>
    where
        S: for<'de> DeserializeSeed<'de, Value = D>,
    {
        // A request with its params decoded as it is read, through `Strict`, and the members
        // no one reads checked: every value of the message read or checked in one pass. Params
        // kept as text (no seed for the method, the seed refused them, the method named twice)
        // were only skipped over, so the whole text is checked before they are taken. Failing
        // that, the general way reads the message, for its error.
        if let Ok(text) = std::str::from_utf8(bytes) {
            let seeded = MembersVisitor {
                seed_for: &seed_for,
            };
            let request = match read_with(text, seeded) {
                Ok(Some(request)) if !request.has_text_params() => return Ok(request),
                // Kept as text already: what a reading without a seed gives.
                Ok(Some(request)) => Some(request),
                _ => {
                    let unseeded = MembersVisitor {
                        seed_for: &|_: &str| None::<S>,
                    };
                    read_with(text, unseeded).ok().flatten()
                }
            };
            if let Some(request) = request
                && checked(text)
            {
                return Ok(request);
            }
        }
        Ok(match Message::from_slice(bytes)? {
            Message::Request(request) => Incoming::Request {
                id: request.id,
                method: request.method,
                params: match request.params {
                    None => RequestParams::Absent,
                    Some(value) => RequestParams::Text(
                        serde_json::value::to_raw_value(&value).expect("JSON values serialize"),
                    ),
                },
            },
            Message::Notification(n) => Incoming::Notification { method: n.method },
            Message::Response(_) | Message::Error(_) => Incoming::Reply,
        })
    }

    fn has_text_params(&self) -> bool {
        matches!(
            self,
            Incoming::Request {
                params: RequestParams::Text(_),
                ..
            }
        )
    }
}

/// Whether `text` decodes as a `Value` would: its strings, numbers and depth.
fn checked(text: &str) -> bool {
    serde_json::from_str::<Checked>(text).is_ok()
}

/// The request `text` holds, read by `visitor`; `None` when it holds a JSON object that is not
/// a request as the general way reads one.
fn read_with<D, S, F>(
    text: &str,
    visitor: MembersVisitor<'_, F>,
) -> serde_json::Result<Option<Incoming<D>>>
where
    S: for<'de> DeserializeSeed<'de, Value = D>,
    F: Fn(&str) -> Option<S>,
{
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let members = deserializer.deserialize_map(visitor)?;
    deserializer.end()?;
    let (Some(id), Some(method)) = (members.id, members.method) else {
        return Ok(None);
    };
    // Params decoded for a method other than the one the message ends up naming (a repeated
    // `method`) are not these params.
    if members.seeded && members.seeded_for.is_some_and(|seeded| seeded != method) {
        return Ok(None);
    }
    let (Ok(id), Ok(method)) = (RequestId::deserialize(id), String::deserialize(method)) else {
        return Ok(None);
    };
    Ok(Some(Incoming::Request {
        id,
        method,
        params: members.params,
    }))
}

/// The members of a message the server reads: `id` and `method` as values (they are small, and
/// decoded from them as the general way does), the params decoded or kept as text.
struct Members<D> {
    id: Option<Value>,
    method: Option<Value>,
    params: RequestParams<D>,
    /// A method's seed decoded the params.
    seeded: bool,
    /// That method, once a later `method` member replaced it (`None` while `method` is still
    /// the one the seed was for): kept only then, so that a request does not copy its method.
    seeded_for: Option<Value>,
}

/// A member's name, told apart without a copy of it (a `Cow<str>` key is always an owned
/// copy: serde fills a `Cow` with its owned form). Escaped names are compared unescaped, as
/// any other key is.
enum Key {
    Id,
    Method,
    Params,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;

        impl Visitor<'_> for Names {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    _ => Key::Other,
                })
            }
        }

        deserializer.deserialize_identifier(Names)
    }
}

struct MembersVisitor<'a, F> {
    seed_for: &'a F,
}

impl<'de, D, S, F> Visitor<'de> for MembersVisitor<'_, F>
where
    S: DeserializeSeed<'de, Value = D>,
    F: Fn(&str) -> Option<S>,
{
    type Value = Members<D>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<D>, A::Error> {
        let mut members = Members {
            id: None,
            method: None,
            params: RequestParams::Absent,
            seeded: false,
            seeded_for: None,
        };
        // As in a `Value`, the last of a repeated member wins.
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => members.id = Some(map.next_value()?),
                Key::Method => {
                    let method = map.next_value()?;
                    if members.seeded && members.seeded_for.is_none() {
                        members.seeded_for = members.method.take();
                    }
                    members.method = Some(method);
                }
                Key::Params => {
                    let method = members.method.as_ref().and_then(Value::as_str);
                    members.seeded_for = None;
                    members.params = match method.and_then(self.seed_for) {
                        Some(seed) => {
                            members.seeded = true;
                            RequestParams::Decoded(map.next_value_seed(Strict(seed))?)
                        }
                        None => {
                            members.seeded = false;
                            let raw: Box<RawValue> = map.next_value()?;
                            match raw.get() {
                                "null" => RequestParams::Absent,
                                _ => RequestParams::Text(raw),
                            }
                        }
                    };
                }
                Key::Other => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed that decodes any params but `null` into a `Value`, standing for a method's own
    /// type (a struct, which `null` is not).
    struct AnyParams;

    impl<'de> DeserializeSeed<'de> for AnyParams {
        type Value = Value;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            match Value::deserialize(d)? {
                Value::Null => Err(serde::de::Error::custom("params are not null")),
                value => Ok(value),
            }
        }
    }

    fn read(bytes: &[u8]) -> serde_json::Result<Incoming<Value>> {
        Incoming::read(bytes, |method| (method == "m").then_some(AnyParams))
    }

    /// A seed that decodes only params with a string `path`, standing for a method's type that
    /// refuses other params.
    struct PathOnly;

    #[derive(Debug, Deserialize)]
    struct WithPath {
        #[allow(dead_code)]
        path: String,
    }

    impl<'de> DeserializeSeed<'de> for PathOnly {
        type Value = Value;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            WithPath::deserialize(d).map(|p| Value::String(format!("{p:?}")))
        }
    }

    /// The params as a `Value`, however they were read.
    fn params_value(params: RequestParams<Value>) -> Option<Value> {
        match params {
            RequestParams::Absent => None,
            RequestParams::Decoded(value) => Some(value),
            RequestParams::Text(raw) => Some(serde_json::from_str(raw.get()).unwrap()),
        }
    }

    /// The server's reading of a message decides as [`Message::from_slice`] does, with the
    /// same error text, and keeps a request's params as sent.
    #[test]
    fn messages_read_as_the_general_way_reads_them() {
        let deep = format!(
            r#"{{"id":1,"method":"n","params":{}0{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let cases: &[&[u8]] = &[
            br#"{"id":1,"method":"m","params":{"path":"/x"}}"#,
            br#"{"jsonrpc":"2.0","id":"a","method":"m","params":[1,{"b":null}]}"#,
            br#"{"params":{"a":1},"id":1,"method":"m"}"#,
            br#"{"id":1,"method":"m","params":null}"#,
            br#"{"id":1,"method":"m"}"#,
            br#"{"id":1,"id":2,"method":"m","params":{"a":1},"params":{"b":2}}"#,
            br#"{"id":1,"method":"m","params":{"a":1},"method":"other"}"#,
            br#"{"id":1,"method":"m","params":{"a":1},"method":"m"}"#,
            br#"{"id":1,"method":"m","params":{"a":1},"method":"n","method":"m"}"#,
            br#"{"id":1,"method":"m","params":{"a":1},"method":"n","params":{"b":2}}"#,
            // Member names escaped: compared unescaped, as a `Value` keys them.
            br#"{"\u0069d":1,"m\u0065thod":"m","p\u0061rams":{"a":1}}"#,
            br#"{"id":1,"method":"m","par\u0061ms\u0000":{"a":1}}"#,
            br#"{"id":null,"method":"m"}"#,
            br#"{"id":1.5,"method":"m"}"#,
            br#"{"id":[1],"method":"m"}"#,
            br#"{"id":1,"method":5}"#,
            br#"{"id":1,"method":null}"#,
            br#"{"method":"initialized"}"#,
            br#"{"method":7}"#,
            br#"{"id":7,"result":{}}"#,
            br#"{"id":7,"error":{"code":-32601,"message":"x"}}"#,
            br#"{"id":7,"error":5}"#,
            br#"{}"#,
            br#"[1,2]"#,
            br#""text""#,
            br#"null"#,
            b"not-json",
            br#"{"id":1,"method":"m","params":{"a":}"#,
            br#"{"id":1,"method":"m","params":{"a":"\q"}}"#,
            br#"{"id":1,"method":"m","params":{"x":"\uZZZZ"}}"#,
            br#"{"id":1,"method":"m"} trailing"#,
            b"",
            // Not UTF-8, where no one reads and where the params are.
            b"{\"id\":1,\"method\":\"m\",\"pasams\":{\"path\":\"/a\x89txt\"}}",
            b"{\"id\":1,\"method\":\"m\",\"params\":{\"x\":\"\xff\"}}",
            // Laxer to skip than to decode: lone surrogates, numbers out of range and nesting
            // past the depth limit, where no one reads them (beside the message's members, a
            // member of params their type does not have, params of a method with no seed).
            br#"{"id":1,"method":"m","other":"\ud800"}"#,
            br#"{"id":1,"method":"m","other":1e400}"#,
            br#"{"id":1,"method":"m","params":{"x":"\udc00"}}"#,
            br#"{"id":1,"method":"m","params":{"x":"\ud800\u0041"}}"#,
            br#"{"id":1,"method":"n","params":[-1e400]}"#,
            deep.as_bytes(),
        ];
        for bytes in cases {
            let shown = String::from_utf8_lossy(bytes);
            let expected = Message::from_slice(bytes);
            match (expected, read(bytes)) {
                (Err(e), Err(r)) => assert_eq!(e.to_string(), r.to_string(), "{shown}"),
                (Ok(Message::Request(q)), Ok(Incoming::Request { id, method, params })) => {
                    assert_eq!((q.id, q.method), (id, method), "{shown}");
                    let params = params_value(params);
                    assert_eq!(q.params.filter(|p| !p.is_null()), params, "{shown}");
                }
                (Ok(Message::Notification(n)), Ok(Incoming::Notification { method })) => {
                    assert_eq!(n.method, method, "{shown}");
                }
                (Ok(Message::Response(_) | Message::Error(_)), Ok(Incoming::Reply)) => {}
                (expected, read) => panic!("{shown}: {expected:?} but {read:?}"),
            }
        }
    }

    /// Params are decoded in the message's pass when their method's seed comes before them;
    /// as text when it comes after them, is named again after them, or the seed refuses them.
    #[test]
    fn params_are_decoded_in_the_messages_pass_only_for_their_method() {
        let read_path = |bytes: &[u8]| {
            Incoming::read(bytes, |method| (method == "m").then_some(PathOnly)).unwrap()
        };
        let decoded = |incoming: Incoming<Value>| match incoming {
            Incoming::Request { params, .. } => matches!(params, RequestParams::Decoded(_)),
            other => panic!("{other:?}"),
        };
        for text in [
            br#"{"id":1,"method":"m","params":{"path":"/a"}}"#.as_slice(),
            // Named again, and in the end the method the seed was for.
            br#"{"id":1,"method":"m","params":{"path":"/a"},"method":"m"}"#,
            br#"{"id":1,"method":"m","params":{"path":"/a"},"method":"n","method":"m"}"#,
            br#"{"\u0069d":1,"m\u0065thod":"m","p\u0061rams":{"path":"/a"}}"#,
        ] {
            let shown = String::from_utf8_lossy(text);
            assert!(decoded(read_path(text)), "{shown}");
        }
        for text in [
            br#"{"id":1,"params":{"path":"/a"},"method":"m"}"#.as_slice(),
            br#"{"id":1,"method":"m","params":{"path":"/a"},"method":"n"}"#,
            br#"{"id":1,"method":"m","params":{"path":"/a"},"method":"m","method":"n"}"#,
            br#"{"id":1,"method":"m","params":{"nopath":1}}"#,
            br#"{"id":1,"method":"n","params":{"path":"/a"}}"#,
        ] {
            let shown = String::from_utf8_lossy(text);
            assert!(!decoded(read_path(text)), "{shown}");
        }
    }

    /// A member of params their type does not read is checked as decoding checks it: refused
    /// with the general way's error, not skipped.
    #[test]
    fn members_a_params_type_does_not_have_are_checked() {
        for text in [
            br#"{"id":1,"method":"m","params":{"path":"/a","x":"\ud800"}}"#.as_slice(),
            br#"{"id":1,"method":"m","params":{"path":"/a","x":-1e400}}"#,
        ] {
            let shown = String::from_utf8_lossy(text);
            let read = Incoming::read(text, |method| (method == "m").then_some(PathOnly));
            let expected = Message::from_slice(text).expect_err("the general way refuses it");
            assert_eq!(read.expect_err(&shown).to_string(), expected.to_string());
        }
    }
}
