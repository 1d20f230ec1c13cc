//! Credentials the clouds' native APIs want instead of a static key: AWS's SigV4 signature
//! over each request (Bedrock) from the SDK's default credential chain, Google's OAuth
//! tokens from Application Default Credentials (Vertex AI), Entra ID tokens from AKS
//! workload identity or a managed identity (Azure OpenAI), each from the provider's own
//! crate, which also refreshes them before they expire. Each prober owns
//! an [`Authorizer`]; it runs before the probe's t0, so a credential refresh (an STS or
//! metadata-server round trip) never lands in a measured latency. Credentials live in
//! memory only: never logged, labelled or shown (the error messages here name the source
//! that failed, never a value).

pub mod aws;
pub mod azure;
pub mod google;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ProbeError;

/// The longest a probe waits for credentials (a metadata server or token endpoint that
/// hangs): then it fails as `auth`, and the failure stands for [`RETRY_AFTER`].
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a failed fetch stands before a probe asks again: a dead source is not asked by
/// every probe (and a slow one not waited on by each).
pub const RETRY_AFTER: Duration = Duration::from_secs(10);

/// A target's `credentials`, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CloudCredentials {
    /// SigV4 with the AWS default chain, for `service` in `region`.
    Aws { region: String, service: String },
    /// An OAuth token from Google's Application Default Credentials (Vertex AI).
    Google,
    /// An Entra ID token: AKS workload identity, else a managed identity (Azure OpenAI).
    Azure,
}

impl CloudCredentials {
    /// The config's names of the sources.
    pub const NAMES: [&'static str; 3] = ["aws", "google", "azure"];
}

/// What signs or authorizes one prober's requests.
#[derive(Debug)]
pub enum Authorizer {
    Aws(Box<aws::AwsSigner>),
    Google(google::GoogleTokens),
    Azure(azure::EntraTokens),
}

impl Authorizer {
    pub fn new(credentials: &CloudCredentials) -> Self {
        match credentials {
            CloudCredentials::Aws { region, service } => Self::Aws(Box::new(aws::AwsSigner::new(
                region.clone(),
                service.clone(),
            ))),
            CloudCredentials::Google => Self::Google(google::GoogleTokens::default()),
            CloudCredentials::Azure => Self::Azure(azure::EntraTokens::default()),
        }
    }

    /// What a fetch that outlived [`FETCH_TIMEOUT`] is (remembered as a failure).
    pub fn timed_out(&self) -> ProbeError {
        let (source, failed) = match self {
            Self::Aws(signer) => (
                "the AWS credential chain (STS, the container or instance metadata endpoint)",
                &signer.failed,
            ),
            Self::Google(tokens) => (
                "Google's Application Default Credentials (the metadata server, a token endpoint)",
                &tokens.failed,
            ),
            Self::Azure(tokens) => (
                "Entra ID (the token endpoint, the managed identity endpoint)",
                &tokens.failed,
            ),
        };
        let reason = format!("{source} did not answer within {FETCH_TIMEOUT:?}");
        failed.remember(&reason);
        ProbeError::Credentials(reason)
    }

    /// Sign or authorize a built request (headers and body final), fetching or refreshing
    /// credentials when they are due.
    pub async fn authorize(&self, request: &mut reqwest::Request) -> Result<(), ProbeError> {
        match self {
            Self::Aws(signer) => signer.sign(request).await,
            Self::Google(tokens) => bearer(request, &tokens.token().await?),
            Self::Azure(tokens) => bearer(request, &tokens.token().await?),
        }
    }
}

/// Put `token` in the request's `Authorization` as a Bearer token (marked sensitive).
fn bearer(request: &mut reqwest::Request, token: &str) -> Result<(), ProbeError> {
    let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ProbeError::Credentials("a token that is not a header value".into()))?;
    value.set_sensitive(true);
    request
        .headers_mut()
        .insert(http::header::AUTHORIZATION, value);
    Ok(())
}

/// A token source's last failure and until when it stands ([`RETRY_AFTER`]).
#[derive(Debug, Default)]
pub struct Failed(Mutex<Option<(Instant, String)>>);

impl Failed {
    /// The failure that still stands, if any.
    pub fn standing(&self) -> Option<ProbeError> {
        let failed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (until, reason) = failed.as_ref()?;
        (Instant::now() < *until).then(|| ProbeError::Credentials(reason.clone()))
    }

    pub fn remember(&self, reason: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now() + RETRY_AFTER, reason.to_owned()));
    }
}

/// An error and every cause under it, `: `-joined: the crates' top-level messages alone
/// ("transient errors") do not say what failed.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
