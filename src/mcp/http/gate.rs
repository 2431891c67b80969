//! Who may call `capfs mcp --listen`: the `Host` must name the listener (no DNS rebinding), an
//! `Origin`, when present, must be one allowed (no browser page), and the bearer token must be
//! the configured one, compared in constant time. Also the OAuth protected-resource metadata
//! (RFC 9728) the 401s point to. No token is ever written to a log or a reply.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use subtle::ConstantTimeEq;

pub(super) type Reply = Response<BoxBody<Bytes, Infallible>>;

/// The path of the protected-resource metadata (RFC 9728, section 3).
pub(super) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The checks of every request.
pub(super) struct Gate {
    tokens: Vec<String>,
    /// `host:port` values the `Host` header may hold, lowercase.
    hosts: Vec<String>,
    /// Allowed `Origin` values, lowercase, without a trailing `/`.
    origins: Vec<String>,
    /// The metadata document and its URL, when an authorization server is configured.
    metadata: Option<(Bytes, String)>,
}

/// Why the token was refused: none was sent, or a wrong one.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NoToken {
    Missing,
    Wrong,
}

impl Gate {
    /// `resource` is the listener's URL; `base` its scheme and authority.
    pub(super) fn new(
        tokens: Vec<String>,
        hosts: Vec<String>,
        origins: &[String],
        authorization_servers: &[String],
        base: &str,
        resource: &str,
        path: &str,
    ) -> Self {
        let metadata = (!authorization_servers.is_empty()).then(|| {
            let document = serde_json::json!({
                "resource": resource,
                "authorization_servers": authorization_servers,
                "bearer_methods_supported": ["header"],
                "resource_name": "capfs mcp",
            });
            let path = if path == "/" { "" } else { path };
            (
                Bytes::from(document.to_string()),
                format!("{base}{METADATA_PATH}{path}"),
            )
        });
        Self {
            tokens,
            hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
            origins: origins.iter().map(|o| normal_origin(o)).collect(),
            metadata,
        }
    }

    /// Whether `Host` names the listener (a request without one is refused).
    pub(super) fn host_allowed(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(h.trim())))
    }

    /// Whether the request has no `Origin` or an allowed one.
    pub(super) fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(header::ORIGIN).iter().peekable();
        if values.peek().is_none() {
            return true;
        }
        values.all(|v| {
            v.to_str()
                .is_ok_and(|o| self.origins.iter().any(|a| *a == normal_origin(o)))
        })
    }

    /// The index of the token the request carries (`Authorization: Bearer TOKEN`).
    pub(super) fn token(&self, headers: &HeaderMap) -> Result<usize, NoToken> {
        let mut presented = None;
        for value in headers.get_all(header::AUTHORIZATION) {
            if let Some(credentials) = value.to_str().ok().and_then(bearer_credentials) {
                presented = Some(credentials);
            }
        }
        let presented = presented.ok_or(NoToken::Missing)?;
        let mut found = None;
        // Every token is compared, each in constant time, whichever matches.
        for (i, token) in self.tokens.iter().enumerate() {
            if bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(i);
            }
        }
        found.ok_or(NoToken::Wrong)
    }

    /// The metadata document, for `GET` of its path.
    pub(super) fn metadata(&self) -> Option<Reply> {
        let (document, _) = self.metadata.as_ref()?;
        let mut reply = Response::new(Full::new(document.clone()).boxed());
        reply.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Some(reply)
    }

    /// Whether `path` is where the metadata is published (with or without the resource's path).
    pub(super) fn is_metadata_path(&self, path: &str) -> bool {
        self.metadata.as_ref().is_some_and(|(_, url)| {
            path == METADATA_PATH || url.ends_with(path) && path.starts_with(METADATA_PATH)
        })
    }

    /// The 401 of a request without the right token: `WWW-Authenticate: Bearer`, pointing to
    /// the metadata when there is some.
    pub(super) fn unauthorized(&self, why: &NoToken) -> Reply {
        let mut challenge = String::from("Bearer realm=\"capfs\"");
        if *why == NoToken::Wrong {
            challenge.push_str(", error=\"invalid_token\"");
        }
        if let Some((_, url)) = &self.metadata {
            challenge.push_str(&format!(", resource_metadata=\"{url}\""));
        }
        let mut reply = plain(
            StatusCode::UNAUTHORIZED,
            match why {
                NoToken::Missing => "capfs mcp: a bearer token is required",
                NoToken::Wrong => "capfs mcp: wrong bearer token",
            },
        );
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            reply.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        reply
    }
}

/// A reply of one line of text.
pub(super) fn plain(status: StatusCode, text: &'static str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

fn normal_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// The credentials of an `Authorization` value with the `Bearer` scheme, whose name is
/// case-insensitive (RFC 9110, section 11.1).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim_start_matches(' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(servers: &[String]) -> Gate {
        Gate::new(
            vec!["secret-one".into()],
            vec!["127.0.0.1:8080".into(), "localhost:8080".into()],
            &["https://App.example/".into()],
            servers,
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/mcp",
            "/mcp",
        )
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn hosts_origins_and_tokens() {
        let g = gate(&[]);
        assert!(g.host_allowed(&headers(&[(header::HOST, "LOCALHOST:8080")])));
        assert!(!g.host_allowed(&headers(&[(header::HOST, "evil.example:8080")])));
        assert!(!g.host_allowed(&headers(&[(header::HOST, "127.0.0.1:8081")])));
        assert!(!g.host_allowed(&headers(&[])));
        assert!(g.origin_allowed(&headers(&[])));
        assert!(g.origin_allowed(&headers(&[(header::ORIGIN, "https://app.example")])));
        assert!(!g.origin_allowed(&headers(&[(header::ORIGIN, "https://app.example:444")])));
        assert!(!g.origin_allowed(&headers(&[(header::ORIGIN, "null")])));
        let auth = |v: &str| g.token(&headers(&[(header::AUTHORIZATION, v)]));
        assert_eq!(auth("Bearer secret-one"), Ok(0));
        assert_eq!(auth("bearer  secret-one"), Ok(0));
        assert_eq!(auth("Bearer secret-on"), Err(NoToken::Wrong));
        assert_eq!(auth("Basic c2VjcmV0LW9uZQ=="), Err(NoToken::Missing));
        assert_eq!(g.token(&headers(&[])), Err(NoToken::Missing));
    }

    #[test]
    fn a_401_points_to_the_metadata_and_never_holds_the_token() {
        let g = gate(&[]);
        let reply = g.unauthorized(&NoToken::Missing);
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            reply.headers()[header::WWW_AUTHENTICATE],
            "Bearer realm=\"capfs\""
        );
        assert!(g.metadata().is_none());
        let g = gate(&["https://auth.example".into()]);
        let reply = g.unauthorized(&NoToken::Wrong);
        let challenge = reply.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert_eq!(
            challenge,
            "Bearer realm=\"capfs\", error=\"invalid_token\", resource_metadata=\
             \"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\""
        );
        assert!(!challenge.contains("secret"));
        assert!(g.is_metadata_path("/.well-known/oauth-protected-resource/mcp"));
        assert!(g.is_metadata_path("/.well-known/oauth-protected-resource"));
        assert!(!g.is_metadata_path("/.well-known/oauth-protected-resource/other"));
    }
}
