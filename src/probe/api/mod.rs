//! The endpoint kinds, one file each (as blackbox_exporter's `prober/` holds
//! one file per probe kind): each owns its path, its request bodies, how its
//! stream's chunks are read and its output-limit field(s). [`kind`] is the
//! one list of them; the names and what the configuration checks of a kind
//! are in [`crate::config::Api`].

mod chat;
mod completions;
pub mod kind;

pub use kind::{BodyInput, EndpointKind};

use crate::config::Api;

/// The endpoint kind a target's `api:` names.
pub fn kind(api: Api) -> &'static dyn EndpointKind {
    match api {
        Api::Chat => &chat::Chat,
        Api::Completions => &completions::Completions,
    }
}
