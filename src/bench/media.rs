//! `inferprobe bench`'s image and video flags: a target's `images` and `videos` settings, so
//! a vision run compares with `vllm bench serve --backend openai-chat` with image content
//! (its random-mm dataset sends random-pixel JPEGs, this one's default too).

use crate::config::{ConfigError, RawMedia};

#[derive(Clone, Debug, Default, clap::Args)]
pub struct MediaArgs {
    /// Images per request (generated unless --image-file, --image-dir or --image-url).
    #[arg(long)]
    pub image_count: Option<u64>,
    /// Generated image width in pixels (default 448).
    #[arg(long)]
    pub image_width: Option<u64>,
    /// Generated image height in pixels (default 448).
    #[arg(long)]
    pub image_height: Option<u64>,
    /// Generated image encoding: jpeg (default) or png.
    #[arg(long)]
    pub image_format: Option<String>,
    /// Generated pixels: noise (every pixel random, as vLLM's random-mm; default) or smooth.
    #[arg(long)]
    pub image_pattern: Option<String>,
    /// Send the same generated image in every request (the cached path, on purpose).
    #[arg(long)]
    pub image_cache: bool,
    /// An image file to send (repeatable; used in order).
    #[arg(long = "image-file")]
    pub image_files: Vec<String>,
    /// A directory of .png/.jpg images to send, in name order.
    #[arg(long)]
    pub image_dir: Option<String>,
    /// An image URL the server fetches (repeatable).
    #[arg(long = "image-url")]
    pub image_urls: Vec<String>,
    /// Videos per request (openai-chat: video_url parts).
    #[arg(long)]
    pub video_count: Option<u64>,
    /// A video file to send (repeatable).
    #[arg(long = "video-file")]
    pub video_files: Vec<String>,
    /// A video URL the server fetches (repeatable).
    #[arg(long = "video-url")]
    pub video_urls: Vec<String>,
}

impl MediaArgs {
    /// The `images` setting the flags make, if any image flag was given.
    pub fn images(&self) -> Option<RawMedia> {
        let any = self.image_count.is_some()
            || self.image_width.is_some()
            || self.image_height.is_some()
            || self.image_format.is_some()
            || self.image_pattern.is_some()
            || self.image_cache
            || !self.image_files.is_empty()
            || self.image_dir.is_some()
            || !self.image_urls.is_empty();
        any.then(|| RawMedia {
            count: self.image_count,
            width: self.image_width,
            height: self.image_height,
            format: self.image_format.clone(),
            pattern: self.image_pattern.clone(),
            cache: self.image_cache.then_some(true),
            files: (!self.image_files.is_empty()).then(|| self.image_files.clone()),
            dir: self.image_dir.clone(),
            urls: (!self.image_urls.is_empty()).then(|| self.image_urls.clone()),
        })
    }

    /// The `videos` setting the flags make, if any video flag was given.
    pub fn videos(&self) -> Option<RawMedia> {
        let any = self.video_count.is_some()
            || !self.video_files.is_empty()
            || !self.video_urls.is_empty();
        any.then(|| RawMedia {
            count: self.video_count,
            files: (!self.video_files.is_empty()).then(|| self.video_files.clone()),
            urls: (!self.video_urls.is_empty()).then(|| self.video_urls.clone()),
            ..RawMedia::default()
        })
    }

    /// An error about a setting these flags made names the flag (`images.width` →
    /// `--image-width`, `images.files[1]` → `--image-file`).
    pub fn name_the_flag(&self, mut error: ConfigError) -> ConfigError {
        let Some((_, setting)) = error
            .key
            .split_once(".images.")
            .or_else(|| error.key.split_once(".videos."))
        else {
            return error;
        };
        let kind = if error.key.contains(".images.") {
            "image"
        } else {
            "video"
        };
        let field = setting.split(['.', '[']).next().unwrap_or(setting);
        let flag = match field {
            "files" => format!("--{kind}-file"),
            "urls" => format!("--{kind}-url"),
            other => format!("--{kind}-{other}"),
        };
        let given = match kind {
            "image" => self.images().is_some(),
            _ => self.videos().is_some(),
        };
        if given {
            error.key = flag;
        }
        error
    }
}
