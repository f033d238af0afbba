//! The methods a run's scores come from, each with its window k: one checkpoint (`single`), the
//! smoothing baseline (the moving average of k single scores), checkpoint averaging (`average`,
//! the mean of k checkpoints' weights) and checkpoint ensembling, by the mean of k predictive
//! distributions (`ensemble`) or by a majority vote (`ensemble_vote`). The names are the ones in
//! every table (`method` columns of stability.csv, differences.csv, the figures' tables).

use anyhow::{bail, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A method, in the order tables list them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    #[default]
    Single,
    Smoothing,
    Average,
    EnsembleMean,
    EnsembleVote,
}

impl Method {
    /// Every method, in table order.
    pub const ALL: [Method; 5] =
        [Method::Single, Method::Smoothing, Method::Average, Method::EnsembleMean, Method::EnsembleVote];

    /// The name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Single => "single",
            Method::Smoothing => "smoothing",
            Method::Average => "average",
            Method::EnsembleMean => "ensemble",
            Method::EnsembleVote => "ensemble_vote",
        }
    }

    /// Either ensembling rule.
    pub fn is_ensemble(self) -> bool {
        matches!(self, Method::EnsembleMean | Method::EnsembleVote)
    }

    /// Forward passes per prediction: k for an ensemble of k, 1 otherwise.
    pub fn inference_cost(self, k: usize) -> usize {
        if self.is_ensemble() {
            k
        } else {
            1
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Method {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Method> {
        match Method::ALL.iter().find(|m| m.name() == s) {
            Some(m) => Ok(*m),
            None => bail!(
                "unknown method `{s}`; the methods are {}",
                Method::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// A method equals its name (as tables and tests spell it).
impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl Serialize for Method {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Method {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Method, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A method with its window: `single` always has k = 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Variant {
    pub method: Method,
    pub k: usize,
}

impl Variant {
    pub const SINGLE: Variant = Variant { method: Method::Single, k: 1 };

    pub fn new(method: Method, k: usize) -> Variant {
        Variant { method, k }
    }
}

impl fmt::Display for Variant {
    /// `single`, `average k=16`: the label figures and tables use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.method {
            Method::Single => write!(f, "{}", self.method),
            m => write!(f, "{m} k={}", self.k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_keep_table_order() {
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>().unwrap(), m);
            assert_eq!(serde_json::from_str::<Method>(&serde_json::to_string(&m).unwrap()).unwrap(), m);
        }
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["single", "smoothing", "average", "ensemble", "ensemble_vote"]);
        let mut sorted = Method::ALL;
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, Method::ALL);
        assert!(Method::EnsembleMean == "ensemble" && Method::EnsembleMean != "ensemble_vote");
        let err = "ensemble-mean".parse::<Method>().unwrap_err().to_string();
        assert!(err.contains("ensemble-mean") && err.contains("ensemble_vote"), "{err}");
    }

    #[test]
    fn labels_and_costs() {
        assert_eq!(Variant::SINGLE.to_string(), "single");
        // widths pad the name as they pad a string (tables align on them)
        assert_eq!(format!("{:<8}|{:>8}", Method::Single, Method::Average), "single  | average");
        assert_eq!(Variant::new(Method::Average, 16).to_string(), "average k=16");
        assert_eq!(Method::EnsembleVote.inference_cost(4), 4);
        assert_eq!(Method::Smoothing.inference_cost(4), 1);
    }
}
