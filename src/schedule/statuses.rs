//! The status of every target, shared by the loops that update it and the
//! pages that show it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::stats::report::TargetStatus;

/// Shared view of every target's status.
pub type Statuses = Arc<RwLock<BTreeMap<String, TargetStatus>>>;
