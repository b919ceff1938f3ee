//! The per-target settings: the keys that `defaults:`, each target and
//! `target_template:` may all set, declared once in `per_target_settings!`.
//! A target's value wins over `defaults:`, which wins over the built-in value
//! (in [`super::defaults`]); a table (`slo`) is merged key by key.
//!
//! Adding such a key: one line in the list below (doc, serde attributes,
//! name, type), its built-in value in `defaults.rs` if it has one, and its
//! consumer in `target.rs`. The three file structs, their strict decoding and
//! the merge follow from the list.
//!
//! Why a macro: serde's `flatten` cannot be combined with
//! `deny_unknown_fields`, so each file struct is decoded through a flat
//! twin that holds its own keys and the list's, and then split.

use std::time::Duration;

use serde::Deserialize;

use super::file::SloFile;
use super::values::{MaxTokensField, RequestsPerLevel};

/// The one list of per-target settings: calls `$then! { $($pass)* [fields] }`.
/// Write a field's doc comments before its `#[serde(...)]` attribute, and
/// types as full paths (the list is expanded in other modules).
macro_rules! per_target_settings {
    ($then:ident ! { $($pass:tt)* }) => {
        $then! { $($pass)* [
            /// Requests sent first and not counted.
            warmup_requests: u32,
            /// Concurrency levels, increasing.
            levels: Vec<u32>,
            /// Requests per level: `Nx` (N times the concurrency) or a number.
            requests_per_level: $crate::config::values::RequestsPerLevel,
            /// Lower bound on requests per level.
            min_requests_per_level: u32,
            /// Limit on one request.
            #[serde(default, with = "humantime_serde")]
            request_timeout: std::time::Duration,
            /// Acceptance limits of a level.
            slo: $crate::config::file::SloFile,
            /// recommended max_in_flight = floor(knee x headroom).
            headroom: f64,
            /// Highest level sent to the target.
            max_concurrency: u32,
            /// Request field that carries the output limit.
            max_tokens_field: $crate::config::values::MaxTokensField,
            /// PEM roots that replace the built-in ones for this server.
            ca_file: std::path::PathBuf,
            /// PEM client certificate chain for mutual TLS (with `key_file`).
            cert_file: std::path::PathBuf,
            /// PEM private key of `cert_file`.
            key_file: std::path::PathBuf,
            /// Stop a level as soon as it is certain to break the SLO.
            early_stop: bool,
            /// Locate the knee between two configured levels to this
            /// resolution: `off`, a share like `25%`, or a count like `1`.
            refine_resolution: $crate::config::gentle::Resolution,
            /// A full climb from the lowest level every this many sweeps;
            /// the others start near the last knee (1: always full).
            full_sweep_every: u32,
        ] }
    };
}

/// Defines [`Settings`] and its merge from the list.
macro_rules! define_settings {
    ([ $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])? $field:ident : $ty:ty, )* ]) => {
        /// The per-target settings as written at one level (`defaults:`, a
        /// target, `target_template:`): every key optional.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Settings {
            $( $(#[doc = $doc])* $(#[serde $serde])? pub $field: Option<$ty>, )*
        }

        impl Settings {
            /// The merge: `self`'s values where set, else `base`'s (a table
            /// key by key: see [`Merge`]).
            pub fn or(&self, base: &Settings) -> Settings {
                Settings {
                    $( $field: Merge::merge(self.$field.as_ref(), base.$field.as_ref()), )*
                }
            }
        }
    };
}

per_target_settings!(define_settings! {});

/// Declares a file struct whose keys are its own plus the per-target
/// settings, gathered in its `settings` field, and decodes it strictly
/// through a flat twin of the same name (so that messages read `expected
/// struct TargetFile` and list every key in order). Attributes on a field:
/// doc comments first, then at most one `#[serde(...)]`, which only the twin
/// gets.
macro_rules! file_struct_with_settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])? pub $field:ident : $ty:ty, )*
        }
    ) => {
        $crate::config::settings::per_target_settings!(file_struct_with_settings! { @expand
            $(#[$meta])*
            pub struct $name {
                $( $(#[doc = $doc])* $(#[serde $serde])? pub $field: $ty, )*
            }
        });
    };
    (
        @expand
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])? pub $field:ident : $ty:ty, )*
        }
        [ $( $(#[doc = $sdoc:literal])* $(#[serde $sserde:tt])? $sfield:ident : $sty:ty, )* ]
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            /// The per-target settings written here.
            pub settings: $crate::config::settings::Settings,
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // The flat twin; its name shadows the outer type in here.
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct $name {
                    $( $(#[serde $serde])? $field: $ty, )*
                    $( $(#[serde $sserde])? $sfield: Option<$sty>, )*
                }
                let flat = <$name as serde::Deserialize>::deserialize(d)?;
                Ok(Self {
                    $( $field: flat.$field, )*
                    settings: $crate::config::settings::Settings {
                        $( $sfield: flat.$sfield, )*
                    },
                })
            }
        }
    };
}

pub(crate) use file_struct_with_settings;
pub(crate) use per_target_settings;

/// How one setting written at two levels combines: the nearer one wins,
/// except that a table is merged key by key.
pub trait Merge: Clone {
    /// `near` over `far`.
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        near.or(far).cloned()
    }
}

impl Merge for u32 {}
impl Merge for f64 {}
impl Merge for Vec<u32> {}
impl Merge for Duration {}
impl Merge for RequestsPerLevel {}
impl Merge for MaxTokensField {}
impl Merge for std::path::PathBuf {}
impl Merge for bool {}
impl Merge for crate::config::gentle::Resolution {}

impl Merge for SloFile {
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        match (near, far) {
            (Some(n), Some(f)) => Some(SloFile {
                p95_latency: n.p95_latency.or(f.p95_latency),
                max_shed_ratio: n.max_shed_ratio.or(f.max_shed_ratio),
                max_error_ratio: n.max_error_ratio.or(f.max_error_ratio),
            }),
            (n, f) => n.or(f).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearer_values_win_and_the_slo_merges_key_by_key() {
        let near = Settings {
            levels: Some(vec![1, 2]),
            slo: Some(SloFile {
                max_shed_ratio: Some(0.2),
                ..Default::default()
            }),
            ..Default::default()
        };
        let far = Settings {
            levels: Some(vec![4]),
            headroom: Some(0.5),
            slo: Some(SloFile {
                p95_latency: Some(Duration::from_secs(3)),
                max_shed_ratio: Some(0.1),
                max_error_ratio: None,
            }),
            ..Default::default()
        };
        let m = near.or(&far);
        assert_eq!(m.levels, Some(vec![1, 2]));
        assert_eq!(m.headroom, Some(0.5));
        assert_eq!(m.warmup_requests, None);
        let slo = m.slo.unwrap();
        assert_eq!(slo.p95_latency, Some(Duration::from_secs(3)));
        assert_eq!(slo.max_shed_ratio, Some(0.2));
        assert_eq!(slo.max_error_ratio, None);
    }
}
