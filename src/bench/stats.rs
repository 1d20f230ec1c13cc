//! The statistics of a run, as vLLM's `bench serve` computes them: numpy's defaults
//! (linear-interpolated percentiles, population standard deviation, an empty list counts
//! as 0), the latency metrics in vLLM's order, and goodput SLOs.

use std::time::Duration;

use crate::record::Measurement;

/// The latency metrics a summary can show, in vLLM's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl Metric {
    pub fn parse_list(list: &str) -> Result<Vec<Metric>, String> {
        let mut metrics: Vec<Metric> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|name| match name {
                "ttft" => Ok(Self::Ttft),
                "tpot" => Ok(Self::Tpot),
                "itl" => Ok(Self::Itl),
                "e2el" => Ok(Self::E2el),
                other => Err(format!("unknown metric `{other}` (ttft, tpot, itl, e2el)")),
            })
            .collect::<Result<_, _>>()?;
        metrics.sort_by_key(|m| *m as u8);
        metrics.dedup();
        Ok(metrics)
    }

    pub(super) fn key(self) -> &'static str {
        ["ttft", "tpot", "itl", "e2el"][self as usize]
    }

    pub(super) fn label(self) -> &'static str {
        ["TTFT", "TPOT", "ITL", "E2EL"][self as usize]
    }

    pub(super) fn title(self) -> &'static str {
        [
            "Time to First Token",
            "Time per Output Token (excl. 1st token)",
            "Inter-token Latency",
            "End-to-end Latency",
        ][self as usize]
    }
}

/// SLOs in milliseconds for goodput: a success is good if within every one (inclusive).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Goodput {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

impl Goodput {
    /// `["ttft:500", "tpot:50"]`
    pub fn parse(items: &[String]) -> Result<Option<Self>, String> {
        if items.is_empty() {
            return Ok(None);
        }
        let mut slo = Self::default();
        for item in items {
            let (name, value) = item
                .split_once(':')
                .ok_or_else(|| format!("`{item}`: expected name:milliseconds"))?;
            let ms: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("`{item}`: milliseconds must be a number >= 0"))?;
            match name {
                "ttft" => slo.ttft_ms = Some(ms),
                "tpot" => slo.tpot_ms = Some(ms),
                "e2el" => slo.e2el_ms = Some(ms),
                other => return Err(format!("`{other}`: goodput takes ttft, tpot, e2el")),
            }
        }
        Ok(Some(slo))
    }

    pub fn is_good(&self, m: &Measurement) -> bool {
        let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
        self.ttft_ms.is_none_or(|slo| ms(m.ttft) <= slo)
            && self.tpot_ms.is_none_or(|slo| ms(m.tpot) <= slo)
            && self.e2el_ms.is_none_or(|slo| ms(Some(m.e2el)) <= slo)
    }
}

/// numpy's `percentile(values, p)` (linear interpolation); `values` sorted ascending.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

/// mean, median, population std, and the requested percentiles of `values` (in ms).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    pub percentiles: Vec<(f64, f64)>,
}

impl Stats {
    pub fn of(mut values: Vec<f64>, percentiles: &[f64]) -> Self {
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mean = if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / n
        };
        let var = if values.is_empty() {
            0.0
        } else {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n
        };
        Self {
            mean,
            median: percentile(&values, 50.0),
            std: var.sqrt(),
            percentiles: percentiles
                .iter()
                .map(|&p| (p, percentile(&values, p)))
                .collect(),
        }
    }
}

/// `99` → "99", `99.9` → "99.9" (vLLM prints whole percentiles without decimals).
pub(super) fn percentile_name(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as u64)
    } else {
        format!("{p}")
    }
}
