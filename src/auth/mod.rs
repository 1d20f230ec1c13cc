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

use crate::error::ProbeError;

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
