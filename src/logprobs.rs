//! The logprobs a server reports for each generated token: one [`Position`] per token, read
//! from the OpenAI shapes vLLM, SGLang, llama.cpp and OpenAI send, streamed or whole.
//!
//! - chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//!   "logprob", "bytes"}]}]}`;
//! - completions: `{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token:
//!   logprob}], "text_offset": [...]}` (a JSON object per position: its order means nothing,
//!   so the alternatives are sorted here).
//!
//! A token is identified by its bytes when the server gives them (a byte-fallback token is
//! not valid UTF-8 on its own, and servers spell such tokens differently as strings).

use serde_json::Value;

/// A token: its bytes, and how to show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Token {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
}

impl Token {
    /// Bytes equal to the text's are not kept: they say nothing more.
    pub fn new(text: &str, bytes: Option<Vec<u8>>) -> Self {
        Self {
            bytes: bytes.filter(|b| b.as_slice() != text.as_bytes()),
            text: text.to_owned(),
        }
    }

    /// What identifies the token: its bytes, else its text's.
    pub fn key(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.text.as_bytes())
    }

    /// A token spelled without saying which one it is: empty text and no bytes (vLLM's
    /// logprobs for a token that is part of a character spanning tokens, in chat and
    /// completions alike), or text with U+FFFD and no bytes (a lossy decode). Two such
    /// tokens may or may not be the same one.
    pub fn is_opaque(&self) -> bool {
        match &self.bytes {
            Some(bytes) => bytes.is_empty(),
            None => self.text.is_empty() || self.text.contains('\u{fffd}'),
        }
    }

    /// Whether two tokens are the same, as far as their spelling tells.
    pub fn identity(&self, other: &Token) -> Identity {
        match (self.is_opaque(), other.is_opaque()) {
            (false, false) if self.key() == other.key() => Identity::Same,
            (false, false) => Identity::Different,
            (true, true) => Identity::Unknown,
            // An opaque token is part of a character: it is not a token of whole text, but
            // it may be a fragment another server spelled out in bytes.
            (true, false) => other.fragment_or_whole(),
            (false, true) => self.fragment_or_whole(),
        }
    }

    fn fragment_or_whole(&self) -> Identity {
        if std::str::from_utf8(self.key()).is_ok() {
            Identity::Different
        } else {
            Identity::Unknown
        }
    }

    pub fn same(&self, other: &Token) -> bool {
        self.identity(other) == Identity::Same
    }

    /// The token as a log line or the status page shows it.
    pub fn display(&self) -> String {
        if self.is_opaque() {
            "<part of a character>".to_owned()
        } else {
            self.text.clone()
        }
    }
}

/// [`Token::identity`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    Same,
    Different,
    /// Both spellings are opaque: nothing tells.
    Unknown,
}

/// One generated token, its logprob and the top alternatives the server listed (the
/// token itself among them, best first).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    pub token: Token,
    pub logprob: Option<f64>,
    #[serde(default)]
    pub top: Vec<(Token, f64)>,
}

impl Position {
    /// How far the chosen token led the best alternative, in nats: from the listed
    /// alternatives, or, when none is listed, the bound its own probability p gives (no
    /// other token can have more than 1 − p). `None` when nothing says.
    pub fn margin(&self) -> Option<f64> {
        let (chosen, own_entry) = self.chosen()?;
        Some(self.margin_of(chosen, own_entry))
    }

    /// [`Position::margin`] for a chosen logprob and own entry already found.
    fn margin_of(&self, chosen: f64, own_entry: Option<usize>) -> f64 {
        let listed = self
            .others(own_entry)
            .map(|(_, lp)| lp)
            .fold(None, |best: Option<f64>, lp| {
                Some(best.map_or(lp, |b| b.max(lp)))
            });
        // The listed alternatives are the best ones; with none listed, the rest of the
        // probability mass bounds them all (-inf when p = 1: sure).
        let best_other = listed.unwrap_or_else(|| (1.0 - chosen.exp()).max(0.0).ln());
        chosen - best_other
    }

    /// How far, at least, the chosen token led `other` (a token other than the chosen
    /// one), in nats: exactly, when `other` is listed; when it is not, the listed
    /// alternatives are the best ones, so it had no more than the least of them, nor more
    /// than the probability mass they leave. Never less than [`Position::margin`].
    pub fn lead_over(&self, other: &Token) -> Option<f64> {
        let (chosen, own_entry) = self.chosen()?;
        let margin = self.margin_of(chosen, own_entry);
        let mut exact = None;
        // Opaque spellings: `other` may be any of these, or a token not listed.
        let mut maybe: Option<f64> = None;
        for (token, lp) in self.others(own_entry) {
            match other.identity(token) {
                // Two entries spelled alike (a byte-fallback token decoding to the same
                // text as a whole one): the likelier bounds the lead.
                Identity::Same => exact = Some(exact.map_or(lp, |e: f64| e.max(lp))),
                Identity::Unknown => maybe = Some(maybe.map_or(lp, |m| m.max(lp))),
                Identity::Different => {}
            }
        }
        let most = match exact {
            Some(lp) => lp,
            None => {
                let least_listed = self.top.iter().map(|&(_, lp)| lp).fold(chosen, f64::min);
                let mass: f64 = self.top.iter().map(|&(_, lp)| lp.exp()).sum::<f64>();
                let mass = if own_entry.is_some() {
                    mass
                } else {
                    mass + chosen.exp()
                };
                // A floor keeps the bound finite where rounding sums the listed mass past 1.
                let unlisted = least_listed.min((1.0 - mass).max(1e-30).ln());
                maybe.map_or(unlisted, |m| m.max(unlisted))
            }
        };
        Some((chosen - most).max(margin))
    }

    /// The chosen token's logprob, and its own entry among the alternatives: the one
    /// spelled the same, or, for an opaque token, the opaque one with the closest logprob
    /// (several opaque alternatives are several different tokens).
    fn chosen(&self) -> Option<(f64, Option<usize>)> {
        let own = |(t, lp): &(Token, f64)| match self.token.identity(t) {
            Identity::Same => Some(0.0),
            Identity::Unknown => Some(self.logprob.map_or(0.0, |c| (c - lp).abs())),
            Identity::Different => None,
        };
        let own_entry = self
            .top
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| own(entry).map(|d| (i, d)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
        let chosen = self.logprob.or_else(|| own_entry.map(|i| self.top[i].1))?;
        Some((chosen, own_entry))
    }

    /// The listed alternatives other than the chosen token.
    fn others(&self, own_entry: Option<usize>) -> impl Iterator<Item = (&Token, f64)> {
        self.top
            .iter()
            .enumerate()
            .filter(move |&(i, (t, _))| Some(i) != own_entry && !t.same(&self.token))
            .map(|(_, (t, lp))| (t, *lp))
    }
}

/// Largest number of positions kept from one response: a canary asks for few tokens.
const MAX_POSITIONS: usize = 4096;
const MAX_ALTERNATIVES: usize = 20;

/// Why a `logprobs` value could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum Unreadable {
    /// Not the shape servers send (a string where a number goes, a missing token): nothing
    /// can be concluded from it.
    Malformed(String),
    /// Well formed, but no log-probability: a positive value, or the chosen token's
    /// logprob `null` (vLLM and SGLang serialize NaN and infinities so). Evidence of
    /// broken numerics in the replica that sent it.
    Impossible(String),
}

impl From<String> for Unreadable {
    fn from(e: String) -> Self {
        Self::Malformed(e)
    }
}

impl From<&str> for Unreadable {
    fn from(e: &str) -> Self {
        Self::Malformed(e.to_owned())
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(e) | Self::Impossible(e) => f.write_str(e),
        }
    }
}

/// Append the positions of a choice's `logprobs` value (`null` adds nothing).
pub fn read(value: &Value, out: &mut Vec<Position>) -> Result<(), Unreadable> {
    match value {
        Value::Null => Ok(()),
        Value::Object(map) if map.contains_key("content") => chat(map.get("content"), out),
        Value::Object(map) if map.contains_key("tokens") => completions(map, out),
        Value::Object(_) => Ok(()), // e.g. chat's {"content": null, "refusal": null}
        other => Err(format!("`logprobs` is not an object: {}", kind(other)).into()),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn push(out: &mut Vec<Position>, position: Position) -> Result<(), Unreadable> {
    if out.len() >= MAX_POSITIONS {
        return Err(format!("more than {MAX_POSITIONS} logprob positions").into());
    }
    if position.logprob.is_some_and(f64::is_nan) {
        return Err(Unreadable::Impossible(format!(
            "position {}: token {:?} has logprob null (NaN or infinite)",
            out.len(),
            position.token.display()
        )));
    }
    out.push(position);
    Ok(())
}

/// A logprob: a number at most 0 (servers send `-9999.0` for impossible tokens; a rounding
/// error of 1e-6 above 0 is tolerated). `null` is `NaN` here: the caller decides whether
/// it may stand for `-inf` (an alternative) or not (the chosen token). Above 0 is no
/// log-probability; a string is malformed.
fn logprob(value: Option<&Value>) -> Result<Option<f64>, Unreadable> {
    match value {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(f64::NAN)),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(lp) if lp <= 1e-6 => Ok(Some(lp.min(0.0))),
            _ => Err(Unreadable::Impossible(format!(
                "logprob {n} is above 0: no log-probability"
            ))),
        },
        Some(other) => Err(format!("logprob is {}", kind(other)).into()),
    }
}

/// A chat token object: `{"token", "logprob", "bytes"}`.
fn chat_token(value: &Value) -> Result<(Token, Option<f64>), Unreadable> {
    let text = value
        .get("token")
        .and_then(Value::as_str)
        .ok_or("a logprob entry has no `token` string")?;
    let bytes = match value.get("bytes") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or("`bytes` holds something other than bytes")?,
        ),
        Some(other) => return Err(format!("`bytes` is {}", kind(other)).into()),
    };
    let lp = match (value.get("logprob"), value.get("prob")) {
        (None, Some(p)) => probability(p)?,
        (lp, _) => logprob(lp)?,
    };
    Ok((Token::new(text, bytes), lp))
}

/// llama.cpp's `prob` (with `post_sampling_probs`: the distribution it drew from), as a
/// logprob; 0, which it lists for no token it kept, is vLLM's `-9999` for "no chance".
fn probability(value: &Value) -> Result<Option<f64>, Unreadable> {
    match value {
        Value::Null => Ok(Some(f64::NAN)),
        Value::Number(n) => match n.as_f64() {
            Some(0.0) => Ok(Some(-9999.0)),
            Some(p) if p > 0.0 && p <= 1.0 + 1e-6 => Ok(Some(p.ln().min(0.0))),
            _ => Err(Unreadable::Impossible(format!(
                "prob {n} is no probability"
            ))),
        },
        other => Err(format!("prob is {}", kind(other)).into()),
    }
}

fn chat(content: Option<&Value>, out: &mut Vec<Position>) -> Result<(), Unreadable> {
    let items = match content {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("`logprobs.content` is {}", kind(other)).into()),
    };
    for item in items {
        let (token, lp) = chat_token(item)?;
        let mut top = Vec::new();
        // llama.cpp lists `top_probs` instead with `post_sampling_probs`.
        let listed = item.get("top_logprobs").or_else(|| item.get("top_probs"));
        if let Some(Value::Array(alternatives)) = listed {
            for alternative in alternatives.iter().take(MAX_ALTERNATIVES) {
                // An alternative's `null` may be `-inf`: a token of no chance, not listed.
                if let (t, Some(lp)) = chat_token(alternative)? {
                    if !lp.is_nan() {
                        top.push((t, lp));
                    }
                }
            }
        }
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        push(
            out,
            Position {
                token,
                logprob: lp,
                top,
            },
        )?;
    }
    Ok(())
}

fn completions(
    map: &serde_json::Map<String, Value>,
    out: &mut Vec<Position>,
) -> Result<(), Unreadable> {
    let array = |key: &str| match map.get(key) {
        None | Some(Value::Null) => Ok(&[][..]),
        Some(Value::Array(items)) => Ok(items.as_slice()),
        Some(other) => Err(format!("`logprobs.{key}` is {}", kind(other))),
    };
    let (tokens, logprobs, tops) = (
        array("tokens")?,
        array("token_logprobs")?,
        array("top_logprobs")?,
    );
    for (i, token) in tokens.iter().enumerate() {
        let text = token
            .as_str()
            .ok_or("`logprobs.tokens` holds a non-string")?;
        let mut top = Vec::new();
        if let Some(Value::Object(alternatives)) = tops.get(i) {
            for (t, lp) in alternatives.iter().take(MAX_ALTERNATIVES) {
                if let Some(lp) = logprob(Some(lp))?.filter(|lp| !lp.is_nan()) {
                    top.push((Token::new(t, None), lp));
                }
            }
        }
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        let position = Position {
            token: Token::new(text, None),
            logprob: logprob(logprobs.get(i))?,
            top,
        };
        push(out, position)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
