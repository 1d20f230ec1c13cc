//! OAuth tokens for Vertex AI from Google's Application Default Credentials, through
//! Google's own crate (google-cloud-auth): `GOOGLE_APPLICATION_CREDENTIALS` (a mounted
//! service-account key, or workload identity federation's external-account file), gcloud's
//! file, else the metadata server (GKE Workload Identity, GCE; `GCE_METADATA_HOST`
//! overrides its address). The crate caches the token and refreshes it in the background
//! four minutes before it expires (every ten seconds for shorter-lived ones).

use google_cloud_auth::credentials::{AccessTokenCredentials, Builder};
use tokio::sync::OnceCell;

use crate::error::ProbeError;

/// What Vertex AI's generative endpoints take.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

#[derive(Default)]
pub struct GoogleTokens {
    credentials: OnceCell<Result<AccessTokenCredentials, String>>,
    pub(super) failed: super::Failed,
}

impl std::fmt::Debug for GoogleTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleTokens").finish_non_exhaustive()
    }
}

impl GoogleTokens {
    /// The current access token (never logged: errors name the source, not a value).
    pub async fn token(&self) -> Result<String, ProbeError> {
        if let Some(failed) = self.failed.standing() {
            return Err(failed);
        }
        let credentials = self
            .credentials
            .get_or_init(|| async {
                Builder::default()
                    .with_scopes([SCOPE])
                    .build_access_token_credentials()
                    .map_err(|e| {
                        format!(
                            "no Google Application Default Credentials: {}",
                            super::chain(&e)
                        )
                    })
            })
            .await
            .as_ref()
            .map_err(|e| ProbeError::Credentials(e.clone()))?;
        match credentials.access_token().await {
            Ok(token) => Ok(token.token),
            Err(e) => {
                let reason = format!(
                    "no Google access token from Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, else the metadata server at {}): {}",
                    std::env::var("GCE_METADATA_HOST")
                        .unwrap_or_else(|_| "metadata.google.internal".into()),
                    super::chain(&e)
                );
                self.failed.remember(&reason);
                Err(ProbeError::Credentials(reason))
            }
        }
    }
}
