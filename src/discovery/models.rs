//! The model an endpoint serves, when neither the object nor the template names it:
//! OpenAI-compatible servers (vLLM, SGLang, llama.cpp) list it at `GET /v1/models`.
//! Asked once per address; an endpoint that does not answer yet (still loading) is asked
//! again on the block's next change or retry.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::Value;

use crate::config::Found;

const TIMEOUT: Duration = Duration::from_secs(3);

pub struct Models {
    client: reqwest::Client,
    known: HashMap<String, String>,
}

impl Models {
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            client,
            known: HashMap::new(),
        }
    }

    pub fn get(&self, url: &str) -> Option<&str> {
        self.known.get(url).map(String::as_str)
    }

    /// Ask every endpoint not known yet, all at once.
    pub async fn resolve(&mut self, endpoints: &[&Found], block: &str) {
        let missing: Vec<&str> = endpoints
            .iter()
            .map(|f| f.url.as_str())
            .filter(|url| !self.known.contains_key(*url))
            .collect();
        let asked = join_all(missing.iter().map(|url| self.ask(url))).await;
        for (url, answer) in missing.into_iter().zip(asked) {
            match answer {
                Ok(model) => {
                    self.known.insert(url.to_owned(), model);
                }
                Err(reason) => tracing::info!(discovery = %block, endpoint = %url, %reason,
                    "no model yet from /v1/models; not probed until it names one"),
            }
        }
        // Forget endpoints that are gone, so an address reused by another server is asked again.
        self.known
            .retain(|url, _| endpoints.iter().any(|f| f.url == *url));
    }

    async fn ask(&self, base: &str) -> Result<String, String> {
        let url = format!("{}/v1/models", base.trim_end_matches('/'));
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| e.without_url().to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| e.without_url().to_string())?;
        body.get("data")
            .and_then(|d| d.get(0))
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| "the answer lists no model (`data[0].id`)".into())
    }
}
