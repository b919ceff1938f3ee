//! The index page's sink: the status of every target, shared by the loops
//! that update it and the pages (`/`, `/targets/NAME`) that show it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use crate::config::{Schedule, Target};
use crate::sinks::sink::Sink;
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::SweepReport;
use crate::stats::status::TargetStatus;

/// Shared view of every target's status.
pub type Statuses = Arc<RwLock<BTreeMap<String, TargetStatus>>>;

/// Keeps every target's status for the pages.
pub struct IndexPage(pub Statuses);

impl IndexPage {
    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, TargetStatus>> {
        // A panic elsewhere while holding the lock leaves plain data behind.
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    fn entry<R>(&self, target: &Target, f: impl FnOnce(&mut TargetStatus) -> R) -> R {
        let mut statuses = self.write();
        let status = statuses
            .entry(target.name.clone())
            .or_insert_with(|| TargetStatus::new(&target.name, &target.model));
        f(status)
    }
}

impl Sink for IndexPage {
    fn target_configured(&self, target: &Arc<Target>, schedule: &Schedule) {
        self.entry(target, |s| {
            s.target = Some(target.clone());
            s.interval = Some(schedule.interval);
        });
    }

    fn target_announced(&self, target: &Target) {
        self.entry(target, |s| s.model = target.model.clone());
    }

    fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        self.entry(target, |s| s.record_shared(report.clone()));
    }

    fn probe(&self, target: &Target, event: &ProbeEvent) {
        if let ProbeEvent::Probed(r) = event {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.entry(target, |s| s.record_probe(r, now));
        }
    }

    fn pair(&self, _report: &PairReport) {}

    fn forget_target(&self, name: &str) {
        self.write().remove(name);
    }
}
