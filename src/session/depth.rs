//! The depth turn's numbers (docs/sessions.md, "The depth turn"): the depth a session pads
//! to (configured, or the window `/v1/models` advertises less a margin) and the padding that
//! brings a history there; apart from the turns, which only send it.

use crate::endpoint::session::{DepthTo, SessionSpec};
use crate::metrics::SessionSeries;
use crate::probe::Prober;
use crate::prompt::conversation::{Conversation, Message};
use crate::prompt::synthetic;

/// The depth this session's depth turn pads to: the configured one, or the window the
/// server advertises less the margin and the turn's output (`None`, said in the log, when
/// it cannot be read).
pub(super) async fn depth_tokens(
    prober: &Prober,
    spec: &SessionSpec,
    series: &SessionSeries,
) -> Option<u64> {
    let depth = match spec.depth?.to {
        DepthTo::Tokens(tokens) => u64::from(tokens),
        DepthTo::Served { margin } => {
            let window = match served_window(prober).await {
                Ok(window) => window,
                Err(e) => {
                    tracing::warn!(target = %prober.target.id, error = %e, "session check: the served window could not be read from /v1/models; no depth turn");
                    return None;
                }
            };
            series.served_window(window);
            (((window as f64) * (1.0 - margin)) as u64).saturating_sub(u64::from(spec.max_tokens))
        }
    };
    series.depth(depth);
    Some(depth)
}

/// The depth turn's padding: enough tokens that its prompt reaches `depth` (exact with the
/// target's tokenizer, else words as tokens), after the history (`measured`: the previous
/// turn's prompt and output as its usage counted them, else its words); `None` when the history already reaches it.
pub(super) async fn padding(
    prober: &Prober,
    depth: u64,
    measured: Option<u64>,
    conversation: &Conversation,
) -> Option<String> {
    let history = measured.unwrap_or_else(|| words(conversation));
    // The question around the padding, and the template's tokens for one more message.
    let needed = depth.checked_sub(history + 48).filter(|n| *n >= 16)?;
    let needed = u32::try_from(needed).ok()?;
    let counter = prober.target.prompts.tokenizer.clone();
    let nonce: u64 = rand::random();
    let text = tokio::task::spawn_blocking(move || {
        synthetic::pair_prefix(needed, nonce, counter.as_deref())
    })
    .await
    .ok()?;
    text.ok()
}

fn words(conversation: &Conversation) -> u64 {
    let mut n = conversation.system.split_whitespace().count();
    for message in &conversation.messages {
        n += match message {
            Message::User(text) => text.split_whitespace().count(),
            Message::Assistant(reply) => {
                reply.text.split_whitespace().count()
                    + reply
                        .calls
                        .iter()
                        .map(|c| c.arguments.len() / 4 + 8)
                        .sum::<usize>()
            }
            Message::ToolResults(results) => results.iter().map(|r| r.content.len() / 4).sum(),
        };
    }
    n as u64
}

/// `max_model_len` of the target's model in `/v1/models` (vLLM, SGLang), beside the
/// target's own path.
async fn served_window(prober: &Prober) -> Result<u64, String> {
    let entry = prober.model_entry().await?.ok_or("no model listed")?;
    entry
        .get("max_model_len")
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n > 0)
        .ok_or_else(|| "no `max_model_len` for the model".to_owned())
}
