//! Multimodal content for probes: the images (and videos) a request carries, as vLLM's
//! benchmark appends them to a chat message.
//!
//! A target's [`MediaSource`] is built once at configuration time (files are checked then,
//! so a bad one fails `inferprobe check`) and gives each probe its [`MediaPart`]s:
//! - generated: an image of a configured size per part, its pixels drawn from the probe's
//!   nonce so no two probes send the same image (a multimodal or prefix cache cannot serve
//!   it), or one image for every probe with `cache`, to measure the cached path on purpose;
//! - files (a list, or a directory's images), used in order, read when a probe needs them;
//! - URLs, which the server fetches.
//!
//! Generating and encoding happen while the prompt is built: before t0, on the blocking
//! pool (never on a thread that stamps chunks), and one image at a time per process, so the
//! raw pixels (25 MB for 4K) exist once at most. A probe in flight then holds its encoded
//! image once: the request body is sent from that buffer ([`body`]), not from copies.

pub mod body;
mod files;
mod generate;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use files::{check_image_file, check_video_file, images_in};
pub use generate::{Format, Pattern, image};

/// Whether a part is an image or a video.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
}

/// One image or video of a request, ready for any wire format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaPart {
    pub kind: MediaKind,
    /// A `data:<mime>;base64,<data>` URL, or the http(s) URL the server fetches.
    pub url: Arc<String>,
    /// For inline data: its MIME type, and where the base64 starts in `url` (Anthropic
    /// takes the two apart).
    pub inline: Option<(&'static str, usize)>,
    /// Pixels, when known (generated and file images; not URLs or videos).
    pub width: u32,
    pub height: u32,
}

impl MediaPart {
    /// An inline part from encoded bytes.
    pub fn inline(
        kind: MediaKind,
        mime: &'static str,
        bytes: &[u8],
        width: u32,
        height: u32,
    ) -> Self {
        use base64::Engine;
        let prefix = format!("data:{mime};base64,");
        let mut url = String::with_capacity(prefix.len() + bytes.len().div_ceil(3) * 4);
        url.push_str(&prefix);
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut url);
        Self {
            kind,
            url: Arc::new(url),
            inline: Some((mime, prefix.len())),
            width,
            height,
        }
    }

    fn remote(kind: MediaKind, url: &str) -> Self {
        Self {
            kind,
            url: Arc::new(url.to_owned()),
            inline: None,
            width: 0,
            height: 0,
        }
    }

    /// The base64 data of an inline part.
    pub fn base64(&self) -> Option<(&'static str, &str)> {
        self.inline.map(|(mime, start)| (mime, &self.url[start..]))
    }
}

/// What a probe's media add up to, for its log line and the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaSummary {
    pub images: u32,
    pub videos: u32,
    /// Pixels of the images whose size is known.
    pub pixels: u64,
}

impl MediaSummary {
    pub fn of(parts: &[MediaPart]) -> Self {
        parts.iter().fold(Self::default(), |mut s, p| {
            match p.kind {
                MediaKind::Image => s.images += 1,
                MediaKind::Video => s.videos += 1,
            }
            s.pixels += u64::from(p.width) * u64::from(p.height);
            s
        })
    }

    pub fn is_empty(&self) -> bool {
        self.images == 0 && self.videos == 0
    }
}

impl std::fmt::Display for MediaSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} image(s)", self.images)?;
        if self.pixels > 0 {
            write!(f, ", {:.2} MP", self.pixels as f64 / 1e6)?;
        }
        if self.videos > 0 {
            write!(f, ", {} video(s)", self.videos)?;
        }
        Ok(())
    }
}

/// Where a target's images or videos come from.
#[derive(Debug)]
pub enum Origin {
    Generated {
        width: u32,
        height: u32,
        format: Format,
        pattern: Pattern,
        /// One image for every probe: built on first use, then shared.
        cache: Option<OnceLock<Arc<[MediaPart]>>>,
    },
    /// Checked at load; read in order, one per part, when a probe is built.
    Files(Vec<FileEntry>),
    Urls(Vec<String>),
}

/// A media file checked at configuration time.
#[derive(Clone, Debug)]
pub struct FileEntry {
    pub path: PathBuf,
    pub mime: &'static str,
    pub width: u32,
    pub height: u32,
}

/// A target's images (or videos): where from, and how many per request.
#[derive(Debug)]
pub struct MediaSource {
    pub kind: MediaKind,
    pub count: u32,
    pub origin: Origin,
    /// Parts handed out so far: files and URLs are used in order across probes.
    next: AtomicU64,
    /// Held while an image is generated and encoded: one at a time per process.
    gate: Arc<Mutex<()>>,
}

impl MediaSource {
    pub fn new(kind: MediaKind, count: u32, origin: Origin, gate: Arc<Mutex<()>>) -> Self {
        Self {
            kind,
            count,
            origin,
            next: AtomicU64::new(0),
            gate,
        }
    }

    /// Which parts the next probe gets (cheap; called where prompts are drawn).
    pub fn draw(&self) -> u64 {
        self.next
            .fetch_add(u64::from(self.count), Ordering::Relaxed)
    }

    /// The parts of the probe that drew `first` with `nonce`: generated, read or named.
    /// Off the clock and off the runtime's workers (see the module doc).
    pub fn build(&self, first: u64, nonce: u64) -> Result<Vec<MediaPart>, String> {
        let count = u64::from(self.count);
        match &self.origin {
            Origin::Generated {
                width,
                height,
                format,
                pattern,
                cache,
            } => {
                let make = |seed: u64| -> Result<Vec<MediaPart>, String> {
                    let _one_at_a_time = self.gate.lock().unwrap_or_else(|e| e.into_inner());
                    (0..count)
                        .map(|i| {
                            image(
                                *width,
                                *height,
                                *format,
                                *pattern,
                                seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                            )
                        })
                        .collect()
                };
                match cache {
                    Some(cell) => {
                        if let Some(parts) = cell.get() {
                            return Ok(parts.to_vec());
                        }
                        let parts: Arc<[MediaPart]> = make(0)?.into();
                        Ok(cell.get_or_init(|| parts).to_vec())
                    }
                    None => make(nonce),
                }
            }
            Origin::Files(entries) => (0..count)
                .map(|i| {
                    let entry = &entries[((first + i) % entries.len() as u64) as usize];
                    let bytes = files::read(&entry.path)?;
                    Ok(MediaPart::inline(
                        self.kind,
                        entry.mime,
                        &bytes,
                        entry.width,
                        entry.height,
                    ))
                })
                .collect(),
            Origin::Urls(urls) => Ok((0..count)
                .map(|i| {
                    MediaPart::remote(self.kind, &urls[((first + i) % urls.len() as u64) as usize])
                })
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests;
