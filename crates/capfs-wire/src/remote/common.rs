//! What the client's files share below the connection itself: a reply as it arrived, and the
//! errors of a call that the server did not answer.

use bytes::Bytes;

/// A reply as it arrived: the whole message, which its caller decodes straight into the type
/// it expects (no `serde_json::Value` in between).
pub(super) type Reply = Bytes;

/// The errors of a call the server did not answer, built in the error module.
pub(super) use crate::error::{connection_lost, no_reply, timed_out};
