//! Entra ID tokens for Azure OpenAI / Azure AI Foundry, through Azure's own crate
//! (azure_identity): AKS workload identity when its webhook set `AZURE_FEDERATED_TOKEN_FILE`
//! (with `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_AUTHORITY_HOST`), else a managed
//! identity (IMDS, App Service). The crate caches each token and fetches a new one when it
//! is within five minutes of expiring.

use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_identity::{ManagedIdentityCredential, WorkloadIdentityCredential};
use tokio::sync::OnceCell;

use crate::error::ProbeError;

/// Azure OpenAI's (Cognitive Services') scope.
const SCOPE: &str = "https://cognitiveservices.azure.com/.default";

#[derive(Default)]
pub struct EntraTokens {
    credential: OnceCell<Result<Arc<dyn TokenCredential>, String>>,
    pub(super) failed: super::Failed,
}

impl std::fmt::Debug for EntraTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntraTokens").finish_non_exhaustive()
    }
}

fn credential() -> Result<Arc<dyn TokenCredential>, String> {
    if std::env::var_os("AZURE_FEDERATED_TOKEN_FILE").is_some() {
        let credential = WorkloadIdentityCredential::new(None)
            .map_err(|e| format!("AKS workload identity: {}", super::chain(&e)))?;
        return Ok(credential);
    }
    let credential = ManagedIdentityCredential::new(None)
        .map_err(|e| format!("managed identity: {}", super::chain(&e)))?;
    Ok(credential)
}

impl EntraTokens {
    /// The current access token (never logged: errors name the source, not a value).
    pub async fn token(&self) -> Result<String, ProbeError> {
        if let Some(failed) = self.failed.standing() {
            return Err(failed);
        }
        let credential = self
            .credential
            .get_or_init(|| async { credential() })
            .await
            .as_ref()
            .map_err(|e| ProbeError::Credentials(e.clone()))?;
        match credential.get_token(&[SCOPE], None).await {
            Ok(token) => Ok(token.token.secret().to_owned()),
            Err(e) => {
                let reason = format!("no Entra ID token: {}", super::chain(&e));
                self.failed.remember(&reason);
                Err(ProbeError::Credentials(reason))
            }
        }
    }
}
