//! The standard `process_*` metrics (CPU, memory, file descriptors, start time), read from
//! `/proc` on each scrape. Names and meanings match the Prometheus client libraries, so the
//! usual dashboards and alerts work. On non-Linux systems the collector emits nothing.

use std::fs;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// `/proc` reports CPU times in USER_HZ, which the kernel fixes at 100 for user space.
const USER_HZ: f64 = 100.0;

#[derive(Debug, Default)]
pub struct ProcessCollector {
    _private: (),
}

impl ProcessCollector {
    pub fn new() -> Self {
        Self::default()
    }
}

#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
}

impl Sample {
    fn read() -> Self {
        let stat = fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().and_then(stat_fields);
        let field = |i: usize| -> Option<f64> { fields.as_ref()?.get(i)?.parse().ok() };
        // Field numbers from proc(5), counted from 1; `fields` starts at field 3.
        let cpu_seconds = field(14 - 3)
            .zip(field(15 - 3))
            .map(|(user, system)| (user + system) / USER_HZ);
        let boot_time = fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        let start_time_seconds = match (boot_time, field(22 - 3)) {
            (Some(boot), Some(ticks)) => Some(boot + ticks / USER_HZ),
            _ => None,
        };
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |key: &str| -> Option<f64> {
            let line = status.lines().find_map(|l| l.strip_prefix(key))?;
            let value: f64 = line.split_whitespace().next()?.parse().ok()?;
            Some(value * 1024.0)
        };
        let open_fds = fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
        let max_fds = fs::read_to_string("/proc/self/limits").ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse().ok()
        });
        Sample {
            cpu_seconds,
            start_time_seconds,
            resident_bytes: kib("VmRSS:"),
            virtual_bytes: kib("VmSize:"),
            open_fds,
            max_fds,
        }
    }
}

/// Fields of `/proc/self/stat` after the command name, which may contain spaces and
/// parentheses and so ends at the *last* `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    Some(after_comm.split_whitespace().collect())
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = Sample::read();
        if let Some(v) = s.cpu_seconds {
            let counter = ConstCounter::new(v);
            let metric = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&Unit::Seconds),
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges = [
            (
                "process_start_time",
                "Start time of the process since unix epoch in seconds",
                Some(Unit::Seconds),
                s.start_time_seconds,
            ),
            (
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(Unit::Bytes),
                s.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(Unit::Bytes),
                s.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                None,
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                None,
                s.max_fds,
            ),
        ];
        for (name, help, unit, value) in gauges {
            if let Some(v) = value {
                let gauge = ConstGauge::new(v);
                let metric =
                    encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_with_parentheses_do_not_shift_fields() {
        let stat = "42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 1234";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[14 - 3], "250"); // utime
        assert_eq!(fields[22 - 3], "1234"); // starttime
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let s = Sample::read();
        assert!(s.resident_bytes.unwrap() > 1024.0 * 1024.0);
        assert!(s.open_fds.unwrap() >= 3.0);
        assert!(s.max_fds.unwrap() >= s.open_fds.unwrap());
        assert!(s.start_time_seconds.unwrap() > 1.6e9);
    }
}
