//! What the client and the server share about carrying WebSocket frames: the outgoing writer
//! and the byte-stream adapter of the stdio transport.

pub(crate) mod stdio;
pub(crate) mod ws;
