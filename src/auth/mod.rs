//! Credentials the clouds' native APIs want instead of a static key: AWS's SigV4 signature
//! over each request (Bedrock) from the SDK's default credential chain. Each prober owns
//! an [`Authorizer`]; it runs before the probe's t0, so a credential refresh (an STS or
//! metadata-server round trip) never lands in a measured latency. Credentials live in
//! memory only: never logged, labelled or shown (the error messages here name the source
//! that failed, never a value).

pub mod aws;

use crate::error::ProbeError;

/// A target's `credentials`, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CloudCredentials {
    /// SigV4 with the AWS default chain, for `service` in `region`.
    Aws { region: String, service: String },
}

impl CloudCredentials {
    /// The config's name of the source.
    pub const NAMES: [&'static str; 1] = ["aws"];
}

/// What signs or authorizes one prober's requests.
#[derive(Debug)]
pub enum Authorizer {
    Aws(aws::AwsSigner),
}

impl Authorizer {
    pub fn new(credentials: &CloudCredentials) -> Self {
        match credentials {
            CloudCredentials::Aws { region, service } => {
                Self::Aws(aws::AwsSigner::new(region.clone(), service.clone()))
            }
        }
    }

    /// Sign or authorize a built request (headers and body final), fetching or refreshing
    /// credentials when they are due.
    pub async fn authorize(&self, request: &mut reqwest::Request) -> Result<(), ProbeError> {
        match self {
            Self::Aws(signer) => signer.sign(request).await,
        }
    }
}
