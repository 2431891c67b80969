//! Whether a WebSocket handshake may proceed (no `Origin` header, and the bearer token when one
//! is configured, compared in constant time). The plain HTTP endpoints are `probes.rs`.

use subtle::ConstantTimeEq;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};

/// Why a handshake is refused: the HTTP status and a one-line body.
pub(super) type Refusal = (StatusCode, &'static str);

pub(super) fn refusal((status, body): Refusal) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = status;
    response
}

/// The credentials of an `Authorization` value with the `Bearer` scheme, whose name is
/// case-insensitive (RFC 9110, section 11.1); `None` for any other scheme.
pub(super) fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim_start_matches(' '))
}

/// True when `presented` is `token`, compared in time that depends only on their lengths.
pub(super) fn token_matches(presented: &str, token: &str) -> bool {
    presented.as_bytes().ct_eq(token.as_bytes()).into()
}

/// Decides whether a handshake may proceed: no `Origin` (no browser page may drive the
/// executor), the right bearer token when one is configured.
pub(super) fn check_handshake(request: &Request, token: Option<&str>) -> Result<(), Refusal> {
    if request.headers().contains_key(header::ORIGIN) {
        return Err((
            StatusCode::FORBIDDEN,
            "capfs: requests with an Origin header are refused",
        ));
    }
    if let Some(token) = token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials)
            .unwrap_or("");
        if !token_matches(presented, token) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "capfs: missing or wrong bearer token",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("secret", "secret"));
        assert!(!token_matches("secret", "secreT"));
        assert!(!token_matches("secret", "secrets"));
        assert!(!token_matches("", "x"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in [
            "Bearer t0k",
            "bearer t0k",
            "BEARER t0k",
            "bEaReR   t0k",
            " Bearer t0k ",
        ] {
            assert_eq!(bearer_credentials(value), Some("t0k"), "{value:?}");
        }
        for value in ["Basic t0k", "Bearert0k", "t0k", "", "Bearer"] {
            assert_eq!(bearer_credentials(value), None, "{value:?}");
        }
    }
}
