//! A request's params, read once: decoded straight into the method's own type as the message
//! is read (`protocol/incoming.rs`, with the [`Seed`] of the method's row), or from their JSON
//! text when the message names its method after them; their paths ([`WirePath`]) are parsed
//! in the same pass, in whichever form the request used. What the server reads of them beside
//! the handler (the paths with what the method does to each, for the request's `sandbox`
//! policy and the audit line; the policy itself) is what the type says through [`Params`]
//! (`params/types.rs`); no member is looked up by name.

use std::any::Any;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer};
use serde_json::value::RawValue;

mod sent;
mod types;

use super::codex::policy::{Need, Policy};
use super::payload::invalid_input;
use crate::protocol::codex::SandboxContext;
use crate::protocol::uri::PathForm;
use crate::protocol::{ErrorObject, INVALID_PARAMS, RequestParams, WirePath};
use capfs::ExecutorFileSystem;
use sent::{note_paths, sent_paths};

/// A request's params as the server has them: decoded into their method's type as the message
/// was read, or their JSON text.
pub(crate) type CallParams = RequestParams<Decoded>;

/// Params decoded as their message was read: a value of their method's params type, and how to
/// list the paths it names as sent (for the audit line of a request refused before it runs).
pub(crate) struct Decoded {
    value: Box<dyn Any + Send>,
    sent: fn(&(dyn Any + Send)) -> Vec<String>,
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decoded")
    }
}

/// How a method's row decodes its params as the message is read.
pub(crate) type Decode =
    fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<Decoded, erased_serde::Error>;

/// The [`Decode`] of a method whose params are `P`.
pub(crate) fn decoder<P: Params + 'static>(
    deserializer: &mut dyn erased_serde::Deserializer<'_>,
) -> Result<Decoded, erased_serde::Error> {
    let params: P = erased_serde::deserialize(deserializer)?;
    Ok(Decoded {
        value: Box::new(params),
        sent: |value| match value.downcast_ref::<P>() {
            Some(p) => sent_of(p),
            None => Vec::new(),
        },
    })
}

/// What the message reader decodes a method's params with: its row's [`Decode`].
pub(crate) struct Seed(pub(crate) Decode);

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Decoded;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Decoded, D::Error> {
        let mut erased = <dyn erased_serde::Deserializer>::erase(deserializer);
        (self.0)(&mut erased).map_err(serde::de::Error::custom)
    }
}

/// What the server reads of a method's params beside its handler.
pub(crate) trait Params: DeserializeOwned + Send {
    /// The paths the params name, each with what the method does to it, in the order an audit
    /// line lists them.
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        std::iter::empty()
    }

    /// The request's `sandbox` policy, for the methods that take one.
    fn sandbox(&self) -> Option<&SandboxContext> {
        None
    }

    /// Text the audit line lists after the paths: where a new link points.
    fn link_target(&self) -> Option<&str> {
        None
    }

    /// The form the request spelled its paths in: `file:` URIs if any path was one.
    fn form(&self) -> PathForm {
        match self.paths().any(|(p, _)| p.form() == PathForm::Uri) {
            true => PathForm::Uri,
            false => PathForm::Plain,
        }
    }
}

/// Decodes `raw` into `P`; a failure is -32602 with kind `InvalidInput` and serde's message.
pub(crate) fn decode<P: DeserializeOwned>(raw: Option<&RawValue>) -> Result<P, ErrorObject> {
    serde_json::from_str(raw.map_or("null", RawValue::get)).map_err(|e| {
        invalid_input(
            INVALID_PARAMS,
            format!("invalid params: {}", message_of(&e)),
        )
    })
}

/// serde's message without the place in the params' text it adds: the params are one member of
/// a message, so a line and column within them would point a reader nowhere.
fn message_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if e.line() == 0 {
        return text;
    }
    let place = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&place) {
        Some(message) => message.to_string(),
        None => text,
    }
}

/// The params of a method whose type is `P`: taken as decoded, or decoded from their text
/// ([`take`]), then checked against the request's `sandbox` policy on `fs` ([`check_policy`]).
pub(crate) async fn read<P: Params + 'static>(
    fs: &dyn ExecutorFileSystem,
    params: CallParams,
    paths: Option<&mut Vec<String>>,
) -> Result<P, ErrorObject> {
    let params = take::<P>(params, paths)?;
    check_policy(fs, &params).await?;
    Ok(params)
}

/// The params of a method whose type is `P`, as decoded when the message was read or decoded
/// from their text now; when the caller keeps them (`paths`), the paths they name as sent: from
/// `P` when they decode, from their members when they do not.
pub(crate) fn take<P: Params + 'static>(
    params: CallParams,
    paths: Option<&mut Vec<String>>,
) -> Result<P, ErrorObject> {
    let params = match params {
        RequestParams::Decoded(decoded) => match decoded.value.downcast::<P>() {
            Ok(p) => Ok(*p),
            Err(_) => unreachable!("params are decoded by their own method's row"),
        },
        RequestParams::Text(raw) => decode::<P>(Some(&raw)).map_err(|e| (e, Some(raw))),
        RequestParams::Absent => decode::<P>(None).map_err(|e| (e, None)),
    };
    if let Some(noted) = paths {
        *noted = match &params {
            Ok(p) => sent_of(p),
            Err((_, raw)) => sent_paths(raw.as_deref()),
        };
    }
    params.map_err(|(e, _)| e)
}

/// The paths `params` name as sent, whatever their method: a request refused before it runs
/// lists them too.
pub(crate) fn sent_before_run(params: &CallParams) -> Vec<String> {
    match params {
        RequestParams::Decoded(decoded) => (decoded.sent)(&*decoded.value),
        RequestParams::Text(raw) => sent_paths(Some(raw)),
        RequestParams::Absent => Vec::new(),
    }
}

/// The paths `params` name as sent, and a new link's target.
fn sent_of<P: Params>(params: &P) -> Vec<String> {
    note_paths(
        params.paths().map(|(path, _)| path.as_sent()),
        params.link_target(),
    )
}

/// Refuses `params` when the request's `sandbox` policy does not allow what its method does to
/// its paths, in the codes of the request's form.
pub(crate) async fn check_policy<P: Params>(
    fs: &dyn ExecutorFileSystem,
    params: &P,
) -> Result<(), ErrorObject> {
    let refused = |e: std::io::Error| ErrorObject::from_io(&e).for_form(params.form());
    let sandbox = params.sandbox().map(SandboxContext::as_value);
    if let Some(policy) = Policy::parse(sandbox).map_err(refused)? {
        for (path, need) in params.paths() {
            policy.check(fs, path, need).await.map_err(refused)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::protocol::codex::OpenParams;
    use crate::protocol::{CopyParams, PathParams, ReadRangeParams};

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    /// Decoding from the params' text says what decoding a `Value` of them said.
    #[test]
    fn errors_read_as_from_a_value() {
        let cases = [
            json!(null),
            json!({}),
            json!([]),
            json!({"path": 7}),
            json!({"path": "relative"}),
            json!({"path": "/a\u{0}b"}),
            json!({"path": "/x", "offset": -1, "length": 1}),
            json!({"path": "/x", "offset": 1.5, "length": 1}),
            json!({"path": "/x", "offset": 1e30, "length": 1}),
            json!({"path": "/x", "offset": "1", "length": 1}),
            json!({"path": "/x", "offset": 1}),
            json!({"path": ["/x"], "offset": 1, "length": 1}),
        ];
        for case in cases {
            let from_value = serde_json::from_value::<ReadRangeParams>(case.clone())
                .map(|_| ())
                .map_err(|e| format!("invalid params: {e}"));
            let from_text = decode::<ReadRangeParams>(Some(&raw(&case)))
                .map(|_| ())
                .map_err(|e| e.message);
            assert_eq!(from_value, from_text, "{case}");
        }
        // What decoding into `AbsolutePathBuf` said of a path that is not text, and of a
        // relative one.
        let number = decode::<PathParams>(Some(&raw(&json!({"path": 7})))).unwrap_err();
        assert_eq!(
            number.message,
            "invalid params: invalid type: integer `7`, expected a string"
        );
        let relative = decode::<PathParams>(Some(&raw(&json!({"path": "a/b"})))).unwrap_err();
        assert_eq!(
            relative.message,
            "invalid params: a/b: path is not absolute"
        );
        let absent = decode::<PathParams>(None).unwrap_err();
        assert_eq!(
            absent.message,
            "invalid params: invalid type: null, expected struct PathParams"
        );
    }

    #[test]
    fn each_type_names_its_paths_with_what_its_method_does_to_them() {
        let copy: CopyParams = serde_json::from_value(json!({
            "sourcePath": "file:///ws/a",
            "destinationPath": "/ws/../ws/b",
        }))
        .unwrap();
        let named: Vec<(String, Need)> = copy
            .paths()
            .map(|(p, need)| (p.as_sent().into_owned(), need))
            .collect();
        assert_eq!(
            named,
            [
                ("file:///ws/a".to_string(), Need::Read),
                ("/ws/../ws/b".to_string(), Need::Write)
            ]
        );
        assert_eq!(copy.form(), PathForm::Uri);
        let replace: OpenParams = serde_json::from_value(json!({
            "handleId": "h", "path": "/ws/a", "mode": "replace",
        }))
        .unwrap();
        assert_eq!(replace.paths().next().unwrap().1, Need::Write);
        assert_eq!(replace.form(), PathForm::Plain);
    }
}

/// Not a test but a measurement, run with
/// `cargo test --release -p capfs-wire decoding_cost -- --ignored --nocapture`: what reading a
/// request and its params costs, beside the general way (a `Value` of the whole message, then
/// the params' type from it), medians of five rounds.
#[cfg(test)]
mod decoding_cost {
    use std::time::Instant;

    use serde::de::DeserializeOwned;

    use super::{Params, Seed, take};
    use crate::protocol::{Incoming, Message, PathParams, WriteFileParams};
    use crate::server::methods;

    fn request(method: &str, params: &str) -> Vec<u8> {
        format!(r#"{{"id":12345,"method":"{method}","params":{params}}}"#).into_bytes()
    }

    /// Nanoseconds per read of `bytes` by `read`, the median of five rounds of `n`.
    fn median_ns(n: u32, bytes: &[u8], read: impl Fn(&[u8])) -> f64 {
        let mut rounds: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..n {
                    read(bytes);
                }
                started.elapsed().as_nanos() as f64 / f64::from(n)
            })
            .collect();
        rounds.sort_by(f64::total_cmp);
        rounds[2]
    }

    fn compare<P: Params + DeserializeOwned + 'static>(name: &str, n: u32, bytes: &[u8]) {
        let general = median_ns(n, bytes, |bytes| {
            let Ok(Message::Request(request)) = Message::from_slice(bytes) else {
                panic!("a request")
            };
            let params: P = serde_json::from_value(request.params.expect("params")).unwrap();
            std::hint::black_box(params);
        });
        let seed_for = |method: &str| methods::method(method)?.runs.decoder().map(Seed);
        let once = median_ns(n, bytes, |bytes| {
            let Ok(Incoming::Request { params, .. }) = Incoming::read(bytes, seed_for) else {
                panic!("a request")
            };
            std::hint::black_box(take::<P>(params, None).unwrap());
        });
        println!(
            "{name}: {once:.0} ns read once, {general:.0} ns through a Value ({:.2}x)",
            once / general
        );
    }

    #[test]
    #[ignore]
    fn decoding_cost() {
        let path = r#"{"path":"/srv/ws/some/dir/file.txt"}"#;
        compare::<PathParams>("fs/getMetadata", 100_000, &request("fs/getMetadata", path));
        for (name, n, bytes) in [
            ("fs/writeFile 4 KiB", 20_000, 4096),
            ("fs/writeFile 1 MiB", 100, 1 << 20),
        ] {
            let data = "QUFB".repeat(bytes / 3);
            let params = format!(r#"{{"path":"/srv/ws/a.txt","dataBase64":"{data}"}}"#);
            compare::<WriteFileParams>(name, n, &request("fs/writeFile", &params));
        }
    }
}
