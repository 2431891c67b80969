//! What the client and the server share about carrying WebSocket frames: the link both ends
//! open on their WebSocket (`link.rs`: the writer task and the read half that tells data frames
//! from JSON messages), the writer loop each end adds its own items to (`writer.rs`), the TCP
//! socket that tungstenite shares with whole data frames written past it (`shared.rs`), the
//! byte stream whose end stops a connection (`stdio.rs`), and the newline-delimited JSON framing
//! of codex's stdio executors (`lines.rs`).

pub(crate) mod lines;
pub(crate) mod link;
pub(crate) mod shared;
pub(crate) mod stdio;
pub(crate) mod writer;
