//! A request's params, read once: decoded from their JSON text straight into the method's own
//! type, whose paths ([`WirePath`]) are parsed in the same pass, in whichever form the request
//! used. What the server reads of them beside the handler (the paths with what the method does
//! to each, for the request's `sandbox` policy and the audit line; the policy itself) is what
//! the type says through [`Params`]; no member is looked up by name.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::audit::{note_paths, sent_paths};
use super::codex::policy::{Need, Policy};
use super::codex::watch::WatchParams;
use super::payload::invalid_input;
use crate::protocol::codex::{
    CloseParams, CodexWalkParams, EnvironmentConfigReadParams, OpenMode, OpenParams,
    ReadBlockParams, SandboxContext, WriteBlockParams,
};
use crate::protocol::process::{
    ReadParams, ResizeParams, SignalParams, StartParams, TerminateParams, WriteParams,
};
use crate::protocol::uri::PathForm;
use crate::protocol::{
    CopyParams, CreateDirectoryParams, CreateSymlinkParams, ErrorObject, INVALID_PARAMS,
    NarrowRootsParams, PathParams, ReadRangeParams, ReadStreamParams, RemoveParams, RenameParams,
    WalkParams, WirePath, WriteFileParams, WriteStreamParams,
};
use capfs::ExecutorFileSystem;

/// A request's params as they arrived: their JSON text, `None` when absent or `null`.
pub(crate) type RawParams = Option<Box<RawValue>>;

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

/// Reads `raw` as the params of a method whose type is `P`: decoded, then checked against the
/// request's `sandbox` policy on `fs` ([`check_policy`]); its paths noted in `paths` as for
/// [`decode_noting`].
pub(crate) async fn read<P: Params>(
    fs: &dyn ExecutorFileSystem,
    raw: Option<&RawValue>,
    paths: Option<&mut Vec<String>>,
) -> Result<P, ErrorObject> {
    let params = decode_noting::<P>(raw, paths)?;
    check_policy(fs, &params).await?;
    Ok(params)
}

/// Decodes `raw` into `P` and, when the caller keeps them (`paths`), notes the paths the
/// params name as sent: from `P` when they decode, from their members when they do not.
pub(crate) fn decode_noting<P: Params>(
    raw: Option<&RawValue>,
    paths: Option<&mut Vec<String>>,
) -> Result<P, ErrorObject> {
    let params = decode::<P>(raw);
    if let Some(noted) = paths {
        *noted = match &params {
            Ok(p) => note_paths(p.paths().map(|(path, _)| path.as_sent()), p.link_target()),
            Err(_) => sent_paths(raw),
        };
    }
    params
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

/// Implements [`Params`] for a type whose members named `$path` are the paths it names, each
/// with the need given.
macro_rules! paths {
    ($ty:ty: $($path:ident => $need:expr),+) => {
        impl Params for $ty {
            fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
                [$((&self.$path, $need)),+].into_iter()
            }

            fn sandbox(&self) -> Option<&SandboxContext> {
                self.sandbox.as_ref()
            }
        }
    };
}

paths!(PathParams: path => Need::Read);
paths!(ReadRangeParams: path => Need::Read);
paths!(ReadStreamParams: path => Need::Read);
paths!(WalkParams: path => Need::Read);
paths!(CodexWalkParams: path => Need::Read);
paths!(WriteFileParams: path => Need::Write);
paths!(WriteStreamParams: path => Need::Write);
paths!(CreateDirectoryParams: path => Need::Write);
paths!(RemoveParams: path => Need::Write);
paths!(CopyParams: source_path => Need::Read, destination_path => Need::Write);
paths!(RenameParams: source_path => Need::Write, destination_path => Need::Write);

impl Params for CreateSymlinkParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        std::iter::once((&self.path, Need::Write))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }

    fn link_target(&self) -> Option<&str> {
        Some(&self.target)
    }
}

impl Params for OpenParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        let need = match self.mode {
            OpenMode::Replace => Need::Write,
            _ => Need::Read,
        };
        std::iter::once((&self.path, need))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }
}

impl Params for WatchParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        let paths = self.present.iter().chain(&self.missing);
        paths.map(|path| (path, Need::Read))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }
}

/// Params that name no path the server checks: handles already checked when opened, the
/// environment's, the processes' (whose handlers read their own `cwd` and policy), the roots a
/// connection narrows to (each checked by the narrowing itself).
macro_rules! no_paths {
    ($($ty:ty),+ $(,)?) => {
        $(impl Params for $ty {})+
    };
}

no_paths!(
    ReadBlockParams,
    WriteBlockParams,
    CloseParams,
    EnvironmentConfigReadParams,
    StartParams,
    ReadParams,
    WriteParams,
    SignalParams,
    TerminateParams,
    ResizeParams,
    NarrowRootsParams,
);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

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
