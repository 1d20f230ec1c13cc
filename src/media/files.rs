//! Media files a configuration names: checked at load (a regular file, not too large, an
//! image that decodes far enough to know its format and size, a video whose container is
//! recognised), then read again for each probe that sends them.

use std::path::{Path, PathBuf};

use super::FileEntry;

/// A 4K PNG is well under this; a bigger file is not a probe's image.
pub const MAX_IMAGE_BYTES: u64 = 32 << 20;
/// A short clip; vLLM's default video fetch timeout bounds what servers accept anyway.
pub const MAX_VIDEO_BYTES: u64 = 64 << 20;
/// What an image may decode to: 8K.
pub const MAX_PIXELS: u64 = 7680 * 4320;

pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    crate::files::read_file(path, MAX_VIDEO_BYTES.max(MAX_IMAGE_BYTES))
}

/// A PNG or JPEG file: its MIME type and size.
pub fn check_image_file(path: &Path) -> Result<FileEntry, String> {
    let bytes = crate::files::read_file(path, MAX_IMAGE_BYTES)?;
    let name = path.display();
    let format = image::guess_format(&bytes).map_err(|_| format!("{name} is not an image"))?;
    let mime = match format {
        image::ImageFormat::Png => "image/png",
        image::ImageFormat::Jpeg => "image/jpeg",
        other => return Err(format!("{name} is {other:?}; PNG and JPEG are supported")),
    };
    let reader = image::ImageReader::with_format(std::io::Cursor::new(&bytes), format);
    let (width, height) = reader
        .into_dimensions()
        .map_err(|e| format!("{name} does not decode: {e}"))?;
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!("{name} is {width}x{height}, over 8K"));
    }
    // The header read, now the pixels: a truncated or corrupt file fails here, not at the
    // server as a 400 on every probe.
    image::load_from_memory_with_format(&bytes, format)
        .map_err(|e| format!("{name} does not decode: {e}"))?;
    Ok(FileEntry {
        path: path.to_owned(),
        mime,
        width,
        height,
    })
}

/// An MP4/QuickTime or WebM/Matroska file, by its container's signature.
pub fn check_video_file(path: &Path) -> Result<FileEntry, String> {
    let bytes = crate::files::read_file(path, MAX_VIDEO_BYTES)?;
    let name = path.display();
    let mime = if bytes.get(4..8) == Some(b"ftyp") {
        if bytes.get(8..10) == Some(b"qt") {
            "video/quicktime"
        } else {
            "video/mp4"
        }
    } else if bytes.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        "video/webm"
    } else {
        return Err(format!(
            "{name} is not an MP4 or WebM video (no ftyp box or EBML header)"
        ));
    };
    Ok(FileEntry {
        path: path.to_owned(),
        mime,
        width: 0,
        height: 0,
    })
}

/// The PNG and JPEG files directly in `dir`, by name.
pub fn images_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let name = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {name}: {e}"))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("{name} holds no .png, .jpg or .jpeg file"));
    }
    Ok(paths)
}
