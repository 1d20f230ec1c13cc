//! Validation of a target's `images` and `videos`: which backend may carry them, generated
//! or from files, a directory or URLs, and every file checked now (a bad one fails
//! `inferprobe check` naming its key), never on the first probe.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use url::Url;

use super::fields::in_range;
use super::{ConfigError, RawMedia, RawTarget};
use crate::endpoint::BackendKind;
use crate::media::{
    Format, MediaKind, MediaSource, Origin, Pattern, check_image_file, check_video_file, images_in,
};

type At<'a> = &'a dyn Fn(&str) -> String;

const DEFAULT_SIZE: u64 = 448;
const MAX_SIDE: u64 = 8192;
const MAX_PIXELS: u64 = 7680 * 4320;
const MAX_PER_REQUEST: u64 = 16;

/// The target's media sources (images, then videos). `gate` serializes image generation
/// across the whole configuration.
pub(super) fn media(
    at: At,
    t: &RawTarget,
    backend: BackendKind,
    gate: &Arc<Mutex<()>>,
) -> Result<Vec<Arc<MediaSource>>, ConfigError> {
    let mut sources = Vec::new();
    for (raw, kind, key) in [
        (&t.images, MediaKind::Image, "images"),
        (&t.videos, MediaKind::Video, "videos"),
    ] {
        let Some(raw) = raw else { continue };
        let refused = match kind {
            MediaKind::Image => (!matches!(
                backend,
                BackendKind::OpenAiChat | BackendKind::Anthropic | BackendKind::OpenAiResponses
            ))
            .then_some("carry no images: use openai-chat, anthropic or openai-responses"),
            MediaKind::Video => (backend != BackendKind::OpenAiChat)
                .then_some("carry no videos: video_url parts are openai-chat's (vLLM)"),
        };
        if let Some(why) = refused {
            return Err(ConfigError::new(
                at(key),
                format!("{backend} requests {why}"),
            ));
        }
        let at = |field: &str| at(&format!("{key}.{field}"));
        sources.push(Arc::new(source(&at, raw, kind, gate)?));
    }
    Ok(sources)
}

fn source(
    at: At,
    raw: &RawMedia,
    kind: MediaKind,
    gate: &Arc<Mutex<()>>,
) -> Result<MediaSource, ConfigError> {
    let count = in_range(&at("count"), raw.count.unwrap_or(1), 1, MAX_PER_REQUEST)? as u32;
    let generated = raw.width.is_some()
        || raw.height.is_some()
        || raw.format.is_some()
        || raw.pattern.is_some()
        || raw.cache.is_some();
    let given: Vec<&str> = [
        ("files", raw.files.is_some()),
        ("dir", raw.dir.is_some()),
        ("urls", raw.urls.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if given.len() > 1 || (generated && !given.is_empty()) {
        return Err(ConfigError::new(
            at(given.last().copied().unwrap_or("files")),
            "set one of: a generated image (width, height, format, pattern, cache), files, dir or urls",
        ));
    }
    let origin = match given.first().copied() {
        None if kind == MediaKind::Video => {
            return Err(ConfigError::new(
                at("files"),
                "videos are not generated: give files or urls",
            ));
        }
        None => generated_origin(at, raw)?,
        Some("urls") => {
            let urls = raw.urls.clone().unwrap_or_default();
            if urls.is_empty() {
                return Err(ConfigError::new(at("urls"), "is empty"));
            }
            for (i, url) in urls.iter().enumerate() {
                let ok = Url::parse(url)
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
                if !ok {
                    return Err(ConfigError::new(
                        at(&format!("urls[{i}]")),
                        format!("`{url}` is not an http(s) URL"),
                    ));
                }
            }
            Origin::Urls(urls)
        }
        Some(key) => {
            let paths: Vec<(String, std::path::PathBuf)> = match key {
                "dir" => {
                    let dir = raw.dir.as_deref().unwrap_or_default();
                    if kind == MediaKind::Video {
                        return Err(ConfigError::new(at("dir"), "give video files as a list"));
                    }
                    images_in(Path::new(dir))
                        .map_err(|e| ConfigError::new(at("dir"), e))?
                        .into_iter()
                        .map(|p| (at("dir"), p))
                        .collect()
                }
                _ => raw
                    .files
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, p)| (at(&format!("files[{i}]")), p.into()))
                    .collect(),
            };
            if paths.is_empty() {
                return Err(ConfigError::new(at(key), "is empty"));
            }
            let check = match kind {
                MediaKind::Image => check_image_file,
                MediaKind::Video => check_video_file,
            };
            let entries = paths
                .into_iter()
                .map(|(key, path)| check(&path).map_err(|e| ConfigError::new(key, e)))
                .collect::<Result<Vec<_>, _>>()?;
            Origin::Files(entries)
        }
    };
    Ok(MediaSource::new(kind, count, origin, Arc::clone(gate)))
}

fn generated_origin(at: At, raw: &RawMedia) -> Result<Origin, ConfigError> {
    let width = in_range(&at("width"), raw.width.unwrap_or(DEFAULT_SIZE), 1, MAX_SIDE)? as u32;
    let height = in_range(
        &at("height"),
        raw.height.unwrap_or(DEFAULT_SIZE),
        1,
        MAX_SIDE,
    )? as u32;
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(ConfigError::new(
            at("width"),
            format!("{width}x{height} is over 8K ({MAX_PIXELS} pixels)"),
        ));
    }
    let format = match raw.format.as_deref() {
        None => Format::Jpeg,
        Some(name) => Format::from_name(name).ok_or_else(|| {
            ConfigError::new(at("format"), format!("`{name}` is not png or jpeg"))
        })?,
    };
    let pattern = match raw.pattern.as_deref() {
        None => Pattern::Noise,
        Some(name) => Pattern::from_name(name).ok_or_else(|| {
            ConfigError::new(at("pattern"), format!("`{name}` is not noise or smooth"))
        })?,
    };
    Ok(Origin::Generated {
        width,
        height,
        format,
        pattern,
        cache: raw.cache.unwrap_or(false).then(OnceLock::new),
    })
}
