//! How an `io::Error` travels: its kind by name in `error.data.kind`, and the codes each
//! protocol form gives it.

use std::io;

use serde_json::Value;

use super::{ErrorObject, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, codex, uri};
pub use capfs::error::kind_name as error_kind_name;
use capfs::error::kind_of_name;

/// Builds an `io::Error` of the kind named `name` (see [`error_kind_name`]); `None` for an
/// unknown name. A refusal keeps its [`capfs::error::Denial`] when its message is a fixed one.
fn error_kind_from_name(name: &str, message: String) -> Option<io::Error> {
    let kind = kind_of_name(name)?;
    Some(if kind == io::ErrorKind::PermissionDenied {
        capfs::error::denied_from_message(message)
    } else {
        io::Error::new(kind, message)
    })
}

impl ErrorObject {
    /// The wire form of a failed fs call: `InvalidInput` is -32600, everything else -32603, and
    /// `data.kind` carries the exact kind.
    pub fn from_io(err: &io::Error) -> Self {
        let code = if err.kind() == io::ErrorKind::InvalidInput {
            INVALID_REQUEST
        } else {
            INTERNAL_ERROR
        };
        Self {
            code,
            message: err.to_string(),
            data: Some(serde_json::json!({ "kind": error_kind_name(err.kind()) })),
        }
    }

    /// The same error with the code the current codex protocol gives its kind: `NotFound` is
    /// -32004 and `PermissionDenied` -32600 (codex's client reads the kind from the code alone);
    /// `data.kind` stays for capfs's own client.
    pub fn for_form(mut self, form: uri::PathForm) -> Self {
        if form == uri::PathForm::Uri && self.code == INTERNAL_ERROR {
            let kind = self
                .data
                .as_ref()
                .and_then(|d| d.get("kind"))
                .and_then(Value::as_str);
            match kind {
                Some("NotFound") => self.code = codex::NOT_FOUND_CODE,
                Some("PermissionDenied") => self.code = INVALID_REQUEST,
                _ => {}
            }
        }
        self
    }

    /// A protocol-level error with no `io::ErrorKind` behind it.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The `io::Error` the call would have given locally: the kind from `data.kind` when
    /// present, otherwise `InvalidInput` for -32600 and -32602, `NotFound` for -32004 and
    /// `Other` for the rest.
    pub fn into_io(self) -> io::Error {
        let named = self
            .data
            .as_ref()
            .and_then(|d| d.get("kind"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(err) = named.and_then(|name| error_kind_from_name(&name, self.message.clone()))
        {
            return err;
        }
        let kind = match self.code {
            INVALID_REQUEST | INVALID_PARAMS => io::ErrorKind::InvalidInput,
            codex::NOT_FOUND_CODE => io::ErrorKind::NotFound,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kind_round_trips() {
        for kind in capfs::error::named_kinds() {
            let wire = ErrorObject::from_io(&io::Error::new(kind, "m"));
            let back = wire.clone().into_io();
            assert_eq!(back.kind(), kind, "{wire:?}");
            assert_eq!(back.to_string(), "m");
            let expected_code = if kind == io::ErrorKind::InvalidInput {
                -32600
            } else {
                -32603
            };
            assert_eq!(wire.code, expected_code);
        }
    }

    #[test]
    fn refusals_cross_the_wire_with_their_reason_and_their_bytes() {
        use capfs::error::{self, Denial, denial};
        let path = capfs::AbsolutePathBuf::new("/ws/a").unwrap();
        let refusals = [
            (error::escape(&path), Denial::Escape),
            (error::outside_roots(&path), Denial::OutsideRoots),
            (error::read_only(&path), Denial::ReadOnlyRoot),
            (error::root_protected(&path), Denial::ProtectedRoot),
        ];
        for (err, reason) in refusals {
            assert_eq!(denial(&err), Some(reason));
            let wire = ErrorObject::from_io(&err);
            assert_eq!(wire.message, format!("/ws/a: {}", reason.text()));
            assert_eq!(
                wire.data,
                Some(serde_json::json!({ "kind": "PermissionDenied" }))
            );
            let back = wire.into_io();
            assert_eq!(denial(&back), Some(reason), "{back}");
            assert_eq!(back.to_string(), err.to_string());
        }
        // Another kind, or the words without a path before them, is not a refusal.
        for (kind, message) in [
            ("NotFound", "/ws/a: sandbox root is read-only"),
            ("PermissionDenied", "sandbox root is read-only"),
            ("PermissionDenied", "/ws/a: sandbox root is read-only!"),
        ] {
            let wire = ErrorObject {
                code: INTERNAL_ERROR,
                message: message.into(),
                data: Some(serde_json::json!({ "kind": kind })),
            };
            assert_eq!(denial(&wire.into_io()), None, "{kind} {message}");
        }
    }

    #[test]
    fn a_peer_without_data_still_maps_codes() {
        assert_eq!(
            ErrorObject::new(INVALID_REQUEST, "x").into_io().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            ErrorObject::new(INTERNAL_ERROR, "x").into_io().kind(),
            io::ErrorKind::Other
        );
    }
}
