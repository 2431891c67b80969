//! The wire protocol, spoken by hand over a raw WebSocket against the real `capfs serve`.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::common::InProcessServer;
use crate::serve::{RawPeer, ServerProcess, error_of, workspace};
use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

mod admission;
mod connections;
mod messages;

fn path_str(p: &std::path::Path) -> String {
    p.to_str().unwrap().to_string()
}

async fn handshake_status(url: &str, headers: &[(header::HeaderName, &str)]) -> Option<StatusCode> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(name.clone(), HeaderValue::from_str(value).unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => None,
        Err(WsError::Http(response)) => Some(response.status()),
        Err(e) => panic!("unexpected handshake failure: {e}"),
    }
}
