//! The sampling check (docs/sampling.md).

pub mod calibration;
pub mod request;
pub mod support;
