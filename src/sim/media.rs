//! Loading a request's images and videos as a vision server would, and the ledger of what
//! arrived.
//!
//! Inline base64 is decoded and URLs are fetched (5 s, 32 MiB, no redirects); an image
//! must decode as PNG or JPEG in full, pixels included, so a truncated or corrupt upload
//! is a 400 here as it is on a real server; a video only needs a container signature (no
//! frames are decoded). Sizes are checked from the header before any pixel is allocated,
//! and decoding runs on the blocking pool, a few at a time, off the threads that time the
//! token writes.
//!
//! The ledger keeps the last [`LEDGER_LEN`] items, served at `GET /sim/media`, so tests
//! can see exactly what a probe sent.

use std::collections::VecDeque;
use std::io::Cursor;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use image::{ImageDecoder, ImageFormat};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::parts::{MediaKind, MediaRef, Payload};

/// Media items `GET /sim/media` remembers.
pub const LEDGER_LEN: usize = 1000;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_FETCH_BYTES: usize = 32 << 20;
/// Largest side and area decoded: 8K fits, a decompression bomb does not.
const MAX_SIDE: u32 = 8192;
const MAX_PIXELS: u64 = 40_000_000;
/// Pixels per image token: 28×28, Qwen2-VL's 14-pixel patches merged 2×2.
const PATCH: u32 = 28;

/// The standard alphabet data URLs use; padding is optional, as Python's decoder (vLLM)
/// does not insist on it either.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// An image or video that loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    pub kind: MediaKind,
    /// `data` (inline base64) or `url` (fetched).
    pub source: &'static str,
    /// `png`, `jpeg`; `mp4`, `mov`, `webm`.
    pub format: &'static str,
    /// Pixels, for images (videos are not decoded).
    pub size: Option<(u32, u32)>,
    /// Encoded bytes.
    pub bytes: usize,
    /// FNV-1a 64 of the encoded bytes.
    pub hash: u64,
}

impl Loaded {
    /// Prompt tokens of the item: one per 28×28 patch, as Qwen2-VL counts an image.
    pub fn tokens(&self) -> u64 {
        self.size.map_or(0, |(w, h)| {
            u64::from(w.div_ceil(PATCH)) * u64::from(h.div_ceil(PATCH))
        })
    }

    pub fn pixels(&self) -> u64 {
        self.size.map_or(0, |(w, h)| u64::from(w) * u64::from(h))
    }
}

pub struct Loader {
    client: reqwest::Client,
    /// Concurrent decodes: each may hold a few hundred MB of pixels.
    decode_slots: Semaphore,
}

impl Loader {
    pub fn new() -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| format!("media client: {e}"))?;
        let slots = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Ok(Self {
            client,
            decode_slots: Semaphore::new(slots),
        })
    }

    /// Every item of a request, in order; the first that fails is the request's 400.
    pub async fn load_all(&self, media: Vec<MediaRef>) -> Result<Vec<Loaded>, String> {
        let mut loaded = Vec::with_capacity(media.len());
        for item in media {
            loaded.push(self.load(item).await?);
        }
        Ok(loaded)
    }

    async fn load(&self, media: MediaRef) -> Result<Loaded, String> {
        let kind = media.kind;
        let fail = |detail: String| format!("Failed to load {}: {detail}", kind.name());
        let (source, declared, bytes) = match media.payload {
            Payload::Base64 { mime, data } => {
                declared_format(kind, &mime).map_err(fail)?;
                let bytes = BASE64
                    .decode(data.trim_ascii())
                    .map_err(|e| fail(format!("invalid base64 data: {e}")))?;
                ("data", Some(mime), bytes)
            }
            Payload::Url(url) => ("url", None, self.fetch(&url).await.map_err(fail)?),
        };
        if bytes.is_empty() {
            return Err(fail("no data".into()));
        }
        let (bytes_len, hash) = (bytes.len(), fnv1a(&bytes));
        let (format, size) = match kind {
            MediaKind::Image => {
                let (format, w, h) = self.decode(bytes).await.map_err(fail)?;
                (format, Some((w, h)))
            }
            MediaKind::Video => (container(&bytes).map_err(|e| fail(e.into()))?, None),
        };
        match declared {
            Some(declared)
                if media.strict_type && declared_format(kind, &declared) != Ok(format) =>
            {
                return Err(fail(format!(
                    "the data is {format}, not the declared media type {declared}"
                )));
            }
            _ => {}
        }
        Ok(Loaded {
            kind,
            source,
            format,
            size,
            bytes: bytes_len,
            hash,
        })
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let unreachable =
            |e: reqwest::Error| format!("cannot fetch {url}: {}", chain(&e.without_url()));
        let mut response = self.client.get(url).send().await.map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("fetching {url} returned HTTP {}", status.as_u16()));
        }
        let too_large = || format!("{url} is larger than {} MiB", MAX_FETCH_BYTES >> 20);
        if response
            .content_length()
            .is_some_and(|n| n > MAX_FETCH_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if bytes.len() + chunk.len() > MAX_FETCH_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    async fn decode(&self, bytes: Vec<u8>) -> Result<(&'static str, u32, u32), String> {
        let _slot = self
            .decode_slots
            .acquire()
            .await
            .map_err(|_| "the decoder is closed".to_owned())?;
        tokio::task::spawn_blocking(move || decode_image(&bytes))
            .await
            .map_err(|_| "the image decoder failed".to_owned())?
    }
}

/// The format a declared MIME type names, if the simulator takes it.
fn declared_format(kind: MediaKind, mime: &str) -> Result<&'static str, String> {
    match (kind, mime) {
        (MediaKind::Image, "image/png") => Ok("png"),
        (MediaKind::Image, "image/jpeg" | "image/jpg") => Ok("jpeg"),
        (MediaKind::Video, "video/mp4") => Ok("mp4"),
        (MediaKind::Video, "video/quicktime") => Ok("mov"),
        (MediaKind::Video, "video/webm" | "video/x-matroska") => Ok("webm"),
        (MediaKind::Image, _) => Err(format!(
            "unsupported media type {mime:?} (image/png and image/jpeg are supported)"
        )),
        (MediaKind::Video, _) => Err(format!(
            "unsupported media type {mime:?} (video/mp4, video/quicktime and video/webm are supported)"
        )),
    }
}

/// A PNG or JPEG, decoded in full: its format and size. The size is read from the header
/// and checked before the pixels are allocated.
fn decode_image(bytes: &[u8]) -> Result<(&'static str, u32, u32), String> {
    let format = image::guess_format(bytes).map_err(|_| "cannot identify image file".to_owned())?;
    let name = match format {
        ImageFormat::Png => "png",
        ImageFormat::Jpeg => "jpeg",
        other => {
            return Err(format!(
                "{other:?} images are not supported (PNG and JPEG are)"
            ));
        }
    };
    let decoder = image::ImageReader::with_format(Cursor::new(bytes), format)
        .into_decoder()
        .map_err(|e| e.to_string())?;
    let (w, h) = decoder.dimensions();
    if w == 0 || h == 0 {
        return Err(format!("the image is {w}x{h}"));
    }
    if w > MAX_SIDE || h > MAX_SIDE || u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(format!(
            "the image is {w}x{h}, over the limit of {MAX_SIDE}x{MAX_SIDE} and {} megapixels",
            MAX_PIXELS / 1_000_000
        ));
    }
    image::DynamicImage::from_decoder(decoder).map_err(|e| e.to_string())?;
    Ok((name, w, h))
}

/// A video's container, by its signature: an ISO BMFF `ftyp` box (MP4, QuickTime) or an
/// EBML header (WebM, Matroska).
fn container(bytes: &[u8]) -> Result<&'static str, &'static str> {
    if bytes.get(4..8) == Some(b"ftyp") {
        Ok(if bytes.get(8..10) == Some(b"qt") {
            "mov"
        } else {
            "mp4"
        })
    } else if bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        Ok("webm")
    } else {
        Err("not an MP4, QuickTime or WebM container (no ftyp box or EBML header)")
    }
}

pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An error and its causes: reqwest's own message omits why the connection failed.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The last [`LEDGER_LEN`] media items received, oldest first.
#[derive(Default)]
pub struct Ledger {
    items: Mutex<VecDeque<Value>>,
}

impl Ledger {
    pub fn record(&self, request_id: Option<&str>, loaded: &[Loaded]) {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        for item in loaded {
            if items.len() == LEDGER_LEN {
                items.pop_front();
            }
            items.push_back(json!({
                "request_id": request_id,
                "kind": item.kind.name(),
                "source": item.source,
                "format": item.format,
                "width": item.size.map(|(w, _)| w),
                "height": item.size.map(|(_, h)| h),
                "bytes": item.bytes,
                "hash": format!("{:016x}", item.hash),
            }));
        }
    }

    pub fn json(&self) -> Value {
        let items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        Value::Array(items.iter().cloned().collect())
    }
}

#[cfg(test)]
mod tests;
