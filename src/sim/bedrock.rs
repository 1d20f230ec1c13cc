//! The simulator's Amazon Bedrock: each request's SigV4 signature checked against a known secret
//! (`--sigv4-secret`), as Bedrock checks it: the signature recomputed over what arrived,
//! the clock within five minutes, a session token not expired.
//!
//! A session token of the form `sim-expires-<unix seconds>` (what tests' credential
//! stand-ins issue) is refused with `ExpiredTokenException` once past, so a probe that
//! failed to refresh its credentials in time is seen failing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use http::{Response, StatusCode};
use serde_json::json;

use super::Body;
use super::respond::json_response;
use crate::auth::aws::{Parts, SignOptions, sign_parts};

/// What Bedrock allows between a request's `x-amz-date` and its own clock.
const SKEW: Duration = Duration::from_secs(300);

/// The prefix of a session token that says when it expires.
pub const EXPIRING_TOKEN: &str = "sim-expires-";

/// A refused request, as Bedrock answers it: the type in `x-amzn-ErrorType`.
fn refuse(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let mut response = json_response(status, json!({ "message": message }));
    if let Ok(value) = http::HeaderValue::from_str(kind) {
        response.headers_mut().insert("x-amzn-errortype", value);
    }
    response
}

/// What a signature is checked over.
pub struct Signed<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

/// Check `request`'s SigV4 signature with `secret`, at `now`.
pub fn verify(secret: &str, request: &Signed, now: SystemTime) -> Result<(), Box<Response<Body>>> {
    let deny =
        |kind: &str, message: String| Box::new(refuse(StatusCode::FORBIDDEN, kind, &message));
    let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
    let auth = header("authorization").ok_or_else(|| {
        deny(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token".into(),
        )
    })?;
    let field = |key: &str| {
        auth.split([' ', ','])
            .find_map(|part| part.trim().strip_prefix(key))
            .unwrap_or("")
    };
    let scope: Vec<&str> = field("Credential=").split('/').collect();
    let [access_key, _, region, service, "aws4_request"] = scope[..] else {
        return Err(deny(
            "IncompleteSignatureException",
            "malformed Credential scope".into(),
        ));
    };
    let signed_names: Vec<&str> = field("SignedHeaders=").split(';').collect();
    let date = header("x-amz-date").unwrap_or("");
    let at = parse_amz_date(date).ok_or_else(|| {
        deny(
            "IncompleteSignatureException",
            "missing or bad X-Amz-Date".into(),
        )
    })?;
    let skew = now
        .duration_since(at)
        .or_else(|_| at.duration_since(now))
        .unwrap_or_default();
    if skew > SKEW {
        return Err(deny(
            "InvalidSignatureException",
            "Signature expired".into(),
        ));
    }
    let token = header("x-amz-security-token");
    if let Some(expires) = token
        .and_then(|t| t.strip_prefix(EXPIRING_TOKEN))
        .and_then(|s| s.parse::<u64>().ok())
    {
        if now > UNIX_EPOCH + Duration::from_secs(expires) {
            return Err(deny(
                "ExpiredTokenException",
                "The security token included in the request is expired".into(),
            ));
        }
    }
    let headers: Vec<(String, String)> = signed_names
        .iter()
        .filter(|n| !matches!(**n, "authorization" | "x-amz-date" | "x-amz-security-token"))
        .filter_map(|n| Some(((*n).to_owned(), header(n)?.to_owned())))
        .collect();
    let credentials = Credentials::new(access_key, secret, token.map(str::to_owned), None, "sim");
    let parts = Parts {
        method: request.method,
        uri: request.uri,
        headers: &headers,
        body: request.body,
    };
    let expected = sign_parts(
        &parts,
        &credentials,
        (region, service),
        at,
        SignOptions::default(),
    )
    .map_err(|e| deny("InvalidSignatureException", e))?;
    let expected = expected
        .iter()
        .find(|(n, _)| n == "authorization")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    if expected != auth {
        return Err(deny(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.".into(),
        ));
    }
    Ok(())
}

/// A token that says it expires (`…sim-expires-<unix seconds>`, what the tests' credential
/// stand-ins issue for AWS, Google and Azure alike) and is past it.
pub fn expired(token: &str, now: SystemTime) -> bool {
    token
        .rsplit_once(EXPIRING_TOKEN)
        .and_then(|(_, unix)| unix.parse::<u64>().ok())
        .is_some_and(|unix| now > UNIX_EPOCH + Duration::from_secs(unix))
}

/// `20150830T123600Z`.
fn parse_amz_date(text: &str) -> Option<SystemTime> {
    if text.len() != 16 || !text.ends_with('Z') || text.as_bytes().get(8) != Some(&b'T') {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    humantime::parse_rfc3339(&iso).ok()
}
