//! SigV4 for Amazon Bedrock: credentials from the AWS SDK's default chain (environment,
//! shared profile, web identity for IRSA through STS, the container endpoint of EKS Pod
//! Identity and ECS, IMDSv2), kept here and refreshed before they expire; each request
//! signed by AWS's own signer (aws-sigv4) over its method, URL, headers and body.
//!
//! The chain is asked again when half of the credentials' life or five minutes (whichever
//! is shorter) remains: IRSA's and Pod Identity's hour-long credentials are refreshed five
//! minutes early, short test credentials at half life. A failed refresh keeps the current
//! credentials while they last (logged, without any value), then fails probes as `auth`.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SessionTokenMode, SignableBody, SignableRequest,
    SigningSettings, UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use http::{HeaderName, HeaderValue};
use tokio::sync::OnceCell;

use crate::error::ProbeError;

/// Headers left unsigned: hop-by-hop ones and those a proxy or mesh may rewrite on the way
/// (W3C trace context above all: a sidecar that continues the trace changes
/// `traceparent`, and a signature over it would fail). botocore's list; aws-sigv4's own
/// default leaves out only four of these, and the botocore cross-check found the
/// difference (tests/aws_cross_check.rs).
const UNSIGNED: [&str; 15] = [
    "authorization",
    "baggage",
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "traceparent",
    "tracestate",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
];

/// Refresh at most this long before expiry.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// Credentials without an expiry (keys in the environment or a file) are read again this
/// often, as the AWS SDK's cache does: a rotated file is picked up.
const REREAD: Duration = Duration::from_secs(15 * 60);

pub struct AwsSigner {
    region: String,
    service: String,
    chain: OnceCell<DefaultCredentialsChain>,
    current: Mutex<Option<Held>>,
    /// The chain's last failure while nothing was held, and until when it stands: probes
    /// in the meantime fail with it instead of walking the chain (and its timeouts) again.
    pub(super) failed: super::Failed,
    /// One refresh at a time; probes that find one under way wait for its result.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for AwsSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsSigner")
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Held {
    credentials: Credentials,
    /// When to ask the chain again.
    refresh_at: Option<SystemTime>,
}

impl Held {
    fn new(credentials: Credentials, now: SystemTime) -> Self {
        let refresh_at = Some(match credentials.expiry() {
            Some(expiry) => {
                let life = expiry.duration_since(now).unwrap_or_default();
                expiry - (life / 2).min(REFRESH_BEFORE)
            }
            None => now + REREAD,
        });
        Self {
            credentials,
            refresh_at,
        }
    }

    fn due(&self, now: SystemTime) -> bool {
        self.refresh_at.is_some_and(|at| now >= at)
    }

    fn usable(&self, now: SystemTime) -> bool {
        self.credentials.expiry().is_none_or(|expiry| now < expiry)
    }
}

impl AwsSigner {
    pub fn new(region: String, service: String) -> Self {
        Self {
            region,
            service,
            chain: OnceCell::new(),
            current: Mutex::new(None),
            failed: super::Failed::default(),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn held(&self) -> Option<Held> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Credentials that are not due for refresh, from the chain if need be.
    async fn credentials(&self) -> Result<Credentials, ProbeError> {
        if let Some(held) = self.held().filter(|h| !h.due(SystemTime::now())) {
            return Ok(held.credentials);
        }
        let _one = self.refreshing.lock().await;
        let now = SystemTime::now();
        let held = self.held();
        if let Some(held) = held.as_ref().filter(|h| !h.due(now)) {
            return Ok(held.credentials.clone());
        }
        if let Some(failed) = self.failed.standing() {
            return Err(failed);
        }
        let region = aws_config::Region::new(self.region.clone());
        let chain = self
            .chain
            .get_or_init(|| DefaultCredentialsChain::builder().region(region).build())
            .await;
        let provided = chain
            .provide_credentials()
            .await
            .map_err(|e| aws_smithy_types::error::display::DisplayErrorContext(&e).to_string());
        // Credentials already expired are no credentials: signing with them fails anyway.
        let provided = provided.and_then(|credentials| {
            let fresh = Held::new(credentials.clone(), now);
            match fresh.usable(SystemTime::now()) {
                true => Ok(credentials),
                false => Err("the chain's credentials had already expired".to_owned()),
            }
        });
        match provided {
            Ok(credentials) => {
                let fresh = Held::new(credentials.clone(), SystemTime::now());
                *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(fresh);
                Ok(credentials)
            }
            Err(reason) => match held.filter(|h| h.usable(now)) {
                Some(mut held) => {
                    tracing::warn!(error = %reason,
                            "could not refresh the AWS credentials; the current ones serve until they expire");
                    held.refresh_at = Some(now + super::RETRY_AFTER);
                    *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(held.clone());
                    Ok(held.credentials)
                }
                None => {
                    let reason = format!("no AWS credentials from the default chain: {reason}");
                    self.failed.remember(&reason);
                    Err(ProbeError::Credentials(reason))
                }
            },
        }
    }

    /// Sign `request` as it stands (its body must be in memory).
    pub async fn sign(&self, request: &mut reqwest::Request) -> Result<(), ProbeError> {
        let credentials = self.credentials().await?;
        let body = match request.body() {
            None => &[][..],
            Some(body) => body.as_bytes().ok_or_else(|| {
                ProbeError::Other("a streamed request body cannot be signed with SigV4".into())
            })?,
        };
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let parts = Parts {
            method: request.method().as_str(),
            uri: request.url().as_str(),
            headers: &headers,
            body,
        };
        let signed = sign_parts(
            &parts,
            &credentials,
            (&self.region, &self.service),
            SystemTime::now(),
            SignOptions::default(),
        )
        .map_err(ProbeError::Other)?;
        for (name, value) in signed {
            let (Ok(name), Ok(mut value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) else {
                return Err(ProbeError::Other(
                    "SigV4 made a header that is not one".into(),
                ));
            };
            value.set_sensitive(true);
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

/// A request to sign, as text.
pub struct Parts<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// How to sign: Bedrock's (the default) or a test vector's.
#[derive(Clone, Copy, Debug)]
pub struct SignOptions {
    pub normalize_path: bool,
    /// Send `x-amz-content-sha256` (S3's habit; Bedrock needs none).
    pub content_sha256: bool,
    pub sign_session_token: bool,
    /// Encode the path's segments twice (every service but S3 wants it).
    pub double_encode: bool,
}

impl Default for SignOptions {
    fn default() -> Self {
        Self {
            normalize_path: true,
            content_sha256: false,
            sign_session_token: true,
            double_encode: true,
        }
    }
}

/// The headers SigV4 adds to `parts` (`authorization`, `x-amz-date`, and the session
/// token when there is one): AWS's signer, with `(region, service)` at `time`.
pub fn sign_parts(
    parts: &Parts,
    credentials: &Credentials,
    (region, service): (&str, &str),
    time: SystemTime,
    options: SignOptions,
) -> Result<Vec<(String, String)>, String> {
    let mut settings = SigningSettings::default();
    settings.excluded_headers = Some(UNSIGNED.iter().map(|h| (*h).into()).collect());
    settings.uri_path_normalization_mode = if options.normalize_path {
        UriPathNormalizationMode::Enabled
    } else {
        UriPathNormalizationMode::Disabled
    };
    if options.content_sha256 {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    }
    if !options.double_encode {
        settings.percent_encoding_mode = PercentEncodingMode::Single;
    }
    if !options.sign_session_token {
        settings.session_token_mode = SessionTokenMode::Exclude;
    }
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let signable = SignableRequest::new(
        parts.method,
        parts.uri,
        parts.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(parts.body),
    )
    .map_err(|e| format!("a request SigV4 cannot sign: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("SigV4: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect())
}

#[cfg(test)]
mod tests;
