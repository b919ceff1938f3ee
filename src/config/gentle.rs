//! Settings that make sweeps gentler on the servers they measure: the
//! resolution of the refinement between levels. Plain data.

use serde::{Deserialize, Deserializer};

/// How finely the knee is located between two configured levels
/// (`refine_resolution`): `off`, a share of the passed level like `10%`, or
/// a count of requests in flight like `1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolution {
    /// No refinement: the knee is one of the configured levels.
    Off,
    /// Stop when the broken level is within this share of the passed one.
    Share(f64),
    /// Stop when the broken level is within this many of the passed one.
    Count(u32),
}

impl Resolution {
    /// The widest gap between a passed and a broken level that is fine
    /// enough at `passed` (always at least 1: levels are whole numbers);
    /// None when refinement is off.
    pub fn allowed_gap(self, passed: u32) -> Option<u32> {
        match self {
            Resolution::Off => None,
            Resolution::Share(s) => Some(((passed as f64 * s).floor() as u32).max(1)),
            Resolution::Count(n) => Some(n.max(1)),
        }
    }
}

impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resolution::Off => f.write_str("off"),
            Resolution::Share(s) => write!(f, "{}%", s * 100.0),
            Resolution::Count(n) => write!(f, "{n}"),
        }
    }
}

impl<'de> Deserialize<'de> for Resolution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Num(u32),
            Text(String),
        }
        let bad = || {
            serde::de::Error::custom(
                "expected `off`, a share of the passed level like `10%`, or a count like `1`",
            )
        };
        match Raw::deserialize(d)? {
            Raw::Bool(false) => Ok(Resolution::Off),
            Raw::Bool(true) => Err(bad()),
            Raw::Num(0) => Err(bad()),
            Raw::Num(n) => Ok(Resolution::Count(n)),
            Raw::Text(s) => {
                let s = s.trim();
                if s == "off" {
                    return Ok(Resolution::Off);
                }
                if let Some(p) = s.strip_suffix('%') {
                    return match p.trim().parse::<f64>() {
                        Ok(p) if p > 0.0 && p <= 100.0 => Ok(Resolution::Share(p / 100.0)),
                        _ => Err(bad()),
                    };
                }
                match s.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(Resolution::Count(n)),
                    _ => Err(bad()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Resolution, String> {
        #[derive(Deserialize)]
        struct W {
            r: Resolution,
        }
        let v: serde_json::Value = serde_json::from_str(yaml).map_err(|e| e.to_string())?;
        serde_json::from_value::<W>(serde_json::json!({ "r": v }))
            .map(|w| w.r)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn forms_of_the_resolution() {
        assert_eq!(parse("\"10%\""), Ok(Resolution::Share(0.1)));
        assert_eq!(parse("\"off\""), Ok(Resolution::Off));
        assert_eq!(parse("false"), Ok(Resolution::Off));
        assert_eq!(parse("1"), Ok(Resolution::Count(1)));
        assert_eq!(parse("\"4\""), Ok(Resolution::Count(4)));
        for bad in ["0", "\"0%\"", "\"150%\"", "\"-3\"", "true", "\"fine\""] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains("expected `off`"), "{bad}: {e}");
        }
    }

    #[test]
    fn allowed_gap_is_at_least_one() {
        assert_eq!(Resolution::Share(0.1).allowed_gap(8), Some(1));
        assert_eq!(Resolution::Share(0.1).allowed_gap(40), Some(4));
        assert_eq!(Resolution::Share(0.25).allowed_gap(16), Some(4));
        assert_eq!(Resolution::Count(3).allowed_gap(100), Some(3));
        assert_eq!(Resolution::Off.allowed_gap(8), None);
        assert_eq!(Resolution::Share(0.1).to_string(), "10%");
    }
}
