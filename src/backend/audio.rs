//! `backend = "openai-audio"`: `POST /v1/audio/transcriptions`, a multipart upload of a WAV
//! the probe generates itself, with a streamed transcript.
//!
//! Two stream dialects exist and both are read: vLLM's chat-like `transcription.chunk`s
//! (`choices[].delta.content`, a final usage chunk, `[DONE]`) and OpenAI's
//! `transcript.text.delta` / `transcript.text.done` events (usage on the latter). TTFT and
//! ITL are measured exactly as for chat.

use http::HeaderValue;
use reqwest::multipart::{Form, Part};
use serde_json::Value;

use super::openai_wire::OpenAiStreamParser;
use super::{Backend, Payload, RequestBody, RequestSpec, StreamEvent, StreamParser, count_field};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::prompt::Prompt;
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;

#[derive(Debug)]
pub struct Transcriptions;

/// Form values are text: JSON strings as-is, everything else in its JSON spelling.
fn form_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Backend for Transcriptions {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let audio = &target.options.audio;
        let wav = wav::generate(audio.seconds, audio.tone_hz);
        let file = Part::bytes(wav).file_name("probe.wav");
        let file = file
            .mime_str("audio/wav")
            .unwrap_or_else(|_| Part::bytes(Vec::new()));
        let mut form = Form::new()
            .part("file", file)
            .text("model", prompt.model.clone())
            .text("stream", "true")
            .text("max_completion_tokens", prompt.max_tokens.to_string());
        if target.include_usage {
            form = form.text("stream_include_usage", "true");
        }
        if target.continuous_usage_stats {
            form = form.text("stream_continuous_usage_stats", "true");
        }
        if let Some(language) = &audio.language {
            form = form.text("language", language.clone());
        }
        for (key, value) in target.sampling.iter().chain(&target.extra_body) {
            form = form.text(key.clone(), form_text(value));
        }
        RequestSpec {
            body: RequestBody::Multipart(form),
            headers: vec![(
                http::header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            )],
        }
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(TranscriptParser)
    }
}

struct TranscriptParser;

impl StreamParser for TranscriptParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        let data = match super::payload(event)? {
            Payload::Done => return Ok(StreamEvent::Done(Chunk::default())),
            Payload::Json(data) => data,
        };
        // OpenAI's dialect names its events in `type`; anything else is vLLM's chat-like one.
        if !data.contains("\"transcript.text.") {
            return OpenAiStreamParser.on_event(event, info);
        }
        let object = super::json_object(data)?;
        match object.get("type").and_then(Value::as_str) {
            Some("transcript.text.delta") => {
                let delta = object.get("delta").and_then(Value::as_str).unwrap_or("");
                info.text.push_str(delta);
                Ok(StreamEvent::Chunk(Chunk {
                    has_output: !delta.is_empty(),
                    ..Chunk::default()
                }))
            }
            Some("transcript.text.done") => {
                let usage = object.get("usage");
                info.finish_reason.get_or_insert_with(|| "stop".into());
                Ok(StreamEvent::Chunk(Chunk {
                    has_output: false,
                    completion_tokens: count_field(
                        usage.and_then(|u| u.get("output_tokens")),
                        "output_tokens",
                    )?,
                    prompt_tokens: count_field(
                        usage.and_then(|u| u.get("input_tokens")),
                        "input_tokens",
                    )?,
                    finished: true,
                    ..Chunk::default()
                }))
            }
            _ => OpenAiStreamParser.on_event(event, info),
        }
    }
}

/// The probe's own audio: 16 kHz mono 16-bit PCM WAV, a sine tone or silence.
pub mod wav {
    const SAMPLE_RATE: u32 = 16_000;

    /// `seconds` of a `tone_hz` sine at half scale (silence when `tone_hz` is 0).
    pub fn generate(seconds: f64, tone_hz: f64) -> Vec<u8> {
        let samples = (seconds * f64::from(SAMPLE_RATE)).round().max(0.0) as u32;
        let data_len = samples * 2;
        let mut wav = Vec::with_capacity(44 + data_len as usize);
        wav.extend_from_slice(b"RIFF");
        wav.extend_from_slice(&(36 + data_len).to_le_bytes());
        wav.extend_from_slice(b"WAVEfmt ");
        wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
        wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
        wav.extend_from_slice(&1u16.to_le_bytes()); // mono
        wav.extend_from_slice(&SAMPLE_RATE.to_le_bytes());
        wav.extend_from_slice(&(SAMPLE_RATE * 2).to_le_bytes()); // byte rate
        wav.extend_from_slice(&2u16.to_le_bytes()); // block align
        wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
        wav.extend_from_slice(b"data");
        wav.extend_from_slice(&data_len.to_le_bytes());
        let step = std::f64::consts::TAU * tone_hz / f64::from(SAMPLE_RATE);
        for i in 0..samples {
            let sample = (f64::from(i) * step).sin() * f64::from(i16::MAX / 2);
            wav.extend_from_slice(&(sample as i16).to_le_bytes());
        }
        wav
    }

    /// Seconds of audio in a WAV made by [`generate`] (or any 16-bit mono PCM WAV with a
    /// 44-byte header), for the simulator's token estimate.
    pub fn seconds(wav: &[u8]) -> Option<f64> {
        if wav.len() < 44 || &wav[..4] != b"RIFF" || &wav[8..12] != b"WAVE" {
            return None;
        }
        let rate = u32::from_le_bytes([wav[24], wav[25], wav[26], wav[27]]);
        let data = u32::from_le_bytes([wav[40], wav[41], wav[42], wav[43]]);
        (rate > 0).then(|| f64::from(data) / 2.0 / f64::from(rate))
    }
}
