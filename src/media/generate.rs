//! Images the probe makes itself: RGB pixels drawn from a seed, encoded as PNG or JPEG.
//!
//! `noise` draws every pixel independently, as vLLM's benchmark does (`random-mm`): the
//! worst case for compression, so the upload is as large as the image can be. `smooth`
//! interpolates a coarse grid of random colours: it compresses like a photo, for a probe
//! that should send what users send. Either way the seed (the probe's nonce) makes every
//! probe's image different.

use image::ImageEncoder;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};

use super::{MediaKind, MediaPart};

/// JPEG quality: PIL's default, which vLLM's benchmark uses.
const JPEG_QUALITY: u8 = 75;
/// Cells of the `smooth` pattern's grid, per side.
const GRID: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
}

impl Format {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "png" => Some(Self::Png),
            "jpeg" | "jpg" => Some(Self::Jpeg),
            _ => None,
        }
    }

    pub const fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Noise,
    Smooth,
}

impl Pattern {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "noise" => Some(Self::Noise),
            "smooth" => Some(Self::Smooth),
            _ => None,
        }
    }
}

/// A `width`×`height` image from `seed`, encoded, as an inline part.
pub fn image(
    width: u32,
    height: u32,
    format: Format,
    pattern: Pattern,
    seed: u64,
) -> Result<MediaPart, String> {
    let pixels = pixels(width as usize, height as usize, pattern, seed);
    let mut encoded = Vec::new();
    let result = match format {
        Format::Png => {
            PngEncoder::new_with_quality(&mut encoded, CompressionType::Fast, FilterType::Adaptive)
                .write_image(&pixels, width, height, image::ExtendedColorType::Rgb8)
        }
        Format::Jpeg => JpegEncoder::new_with_quality(&mut encoded, JPEG_QUALITY).write_image(
            &pixels,
            width,
            height,
            image::ExtendedColorType::Rgb8,
        ),
    };
    result.map_err(|e| format!("cannot encode a {width}x{height} image: {e}"))?;
    drop(pixels);
    Ok(MediaPart::inline(
        MediaKind::Image,
        format.mime(),
        &encoded,
        width,
        height,
    ))
}

fn pixels(width: usize, height: usize, pattern: Pattern, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pixels = vec![0u8; width * height * 3];
    match pattern {
        Pattern::Noise => rng.fill_bytes(&mut pixels),
        Pattern::Smooth => {
            // Random colours at the corners of a GRID×GRID grid, interpolated in between.
            let corners: Vec<[f32; 3]> = (0..(GRID + 1) * (GRID + 1))
                .map(|_| [rng.random(), rng.random(), rng.random()].map(|c: f32| c * 255.0))
                .collect();
            let cell_w = width as f32 / GRID as f32;
            let cell_h = height as f32 / GRID as f32;
            for y in 0..height {
                let fy = y as f32 / cell_h;
                let (gy, ty) = ((fy as usize).min(GRID - 1), fy.fract());
                for x in 0..width {
                    let fx = x as f32 / cell_w;
                    let (gx, tx) = ((fx as usize).min(GRID - 1), fx.fract());
                    let at = |gx: usize, gy: usize| corners[gy * (GRID + 1) + gx];
                    let (a, b, c, d) = (
                        at(gx, gy),
                        at(gx + 1, gy),
                        at(gx, gy + 1),
                        at(gx + 1, gy + 1),
                    );
                    let px = &mut pixels[(y * width + x) * 3..][..3];
                    for ch in 0..3 {
                        let top = a[ch] + (b[ch] - a[ch]) * tx;
                        let bottom = c[ch] + (d[ch] - c[ch]) * tx;
                        px[ch] = (top + (bottom - top) * ty) as u8;
                    }
                }
            }
        }
    }
    pixels
}
