//! What the client and the server share about carrying WebSocket frames: the outgoing writer,
//! the TCP socket that tungstenite shares with whole data frames written past it, and the
//! byte-stream adapter of the stdio transport, and the newline-delimited JSON framing of codex's
//! stdio executors.

pub(crate) mod lines;
pub(crate) mod link;
pub(crate) mod shared;
pub(crate) mod stdio;
pub(crate) mod writer;
