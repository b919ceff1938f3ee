//! Metrics of target discovery from files and of sharding (see `fleet`):
//! per discovery file, per known target, and this instance's shard.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::metrics::names::{self, Spec};
use crate::metrics::register::counter;

/// Metrics of target discovery from files and of sharding (see `fleet`),
/// a part of [`super::Metrics`].
pub(crate) struct FleetMetrics {
    read_errors: IntCounterVec,
    file_targets: IntGaugeVec,
    file_invalid: IntGaugeVec,
    refused: IntGaugeVec,
    fleet_target: IntGaugeVec,
    shard_targets: IntGaugeVec,
    shard_info: IntGaugeVec,
    exported: Mutex<FleetExported>,
}

/// Label values exported now, so that those that went away can be removed.
#[derive(Default)]
struct FleetExported {
    files: BTreeSet<String>,
    targets: BTreeSet<[String; 3]>,
    shard: Option<[String; 2]>,
}

impl fmt::Debug for FleetMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetMetrics").finish_non_exhaustive()
    }
}

impl FleetMetrics {
    /// Creates the discovery and sharding metrics and registers them.
    pub(crate) fn new(registry: &Registry) -> Result<FleetMetrics, prometheus::Error> {
        let gauge = |spec: &Spec| {
            let g = IntGaugeVec::new(Opts::new(spec.name, spec.help), spec.labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok::<_, prometheus::Error>(g)
        };
        Ok(FleetMetrics {
            read_errors: counter(registry, &names::FILE_SD_READ_ERRORS)?,
            file_targets: gauge(&names::FILE_SD_TARGETS)?,
            file_invalid: gauge(&names::FILE_SD_INVALID)?,
            refused: gauge(&names::FILE_SD_REFUSED)?,
            fleet_target: gauge(&names::FLEET_TARGET)?,
            shard_targets: gauge(&names::SHARD_TARGETS)?,
            shard_info: gauge(&names::SHARD_INFO)?,
            exported: Mutex::new(FleetExported::default()),
        })
    }

    /// Counts a failed read of a discovery file.
    pub(crate) fn file_read_failed(&self, file: &str) {
        self.read_errors.with_label_values(&[file]).inc();
    }

    /// Replaces the per-file series: `(file, valid targets, invalid entries)`;
    /// files not listed any more lose their series.
    pub(crate) fn set_files(&self, files: &[(String, usize, usize)]) {
        let mut exported = self.exported.lock().unwrap_or_else(PoisonError::into_inner);
        let now: BTreeSet<String> = files.iter().map(|(f, _, _)| f.clone()).collect();
        for gone in exported.files.difference(&now) {
            let _ = self.read_errors.remove_label_values(&[gone]);
            let _ = self.file_targets.remove_label_values(&[gone]);
            let _ = self.file_invalid.remove_label_values(&[gone]);
        }
        for (file, valid, invalid) in files {
            // Present at 0 from the start, so increase() sees the first error.
            let _ = self.read_errors.with_label_values(&[file]);
            self.file_targets
                .with_label_values(&[file])
                .set(*valid as i64);
            self.file_invalid
                .with_label_values(&[file])
                .set(*invalid as i64);
        }
        exported.files = now;
    }

    /// Sets the discovered targets not started for the prompt memory cap.
    pub(crate) fn set_refused(&self, refused: usize) {
        self.refused
            .with_label_values(&[names::REFUSED_PROMPT_MEMORY])
            .set(refused as i64);
    }

    /// Replaces the fleet series: every known target as `(name, source,
    /// owning shard)`, this instance's shard and how many targets it owns.
    pub(crate) fn set_fleet(
        &self,
        targets: &[(&str, &str, u32)],
        index: u32,
        count: u32,
        owned: usize,
    ) {
        let mut exported = self.exported.lock().unwrap_or_else(PoisonError::into_inner);
        let now: BTreeSet<[String; 3]> = targets
            .iter()
            .map(|(t, s, o)| [t.to_string(), s.to_string(), o.to_string()])
            .collect();
        for gone in exported.targets.difference(&now) {
            let _ = self
                .fleet_target
                .remove_label_values(&[&gone[0], &gone[1], &gone[2]]);
        }
        for t in &now {
            self.fleet_target
                .with_label_values(&[&t[0], &t[1], &t[2]])
                .set(1);
        }
        exported.targets = now;
        let shard = [index.to_string(), count.to_string()];
        if let Some(old) = exported.shard.take() {
            if old != shard {
                let _ = self.shard_info.remove_label_values(&[&old[0], &old[1]]);
                let _ = self.shard_targets.remove_label_values(&[&old[0]]);
            }
        }
        self.shard_info
            .with_label_values(&[&shard[0], &shard[1]])
            .set(1);
        self.shard_targets
            .with_label_values(&[&shard[0]])
            .set(owned as i64);
        exported.shard = Some(shard);
    }
}
