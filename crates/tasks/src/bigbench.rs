//! BIG-bench's subject-verb agreement task (PyPI `bigbench==1.0.0`,
//! `bigbench/benchmark_tasks/subject_verb_agreement/`) as two-way multiple choice: the context
//! is an item's `input` (a sentence prefix such as `"The athlete "`), the continuations its two
//! targets (`"admires"`, `"admire"`), gold the target scored 1. Strings are kept as the files
//! have them (the trailing space stays on the context).
//!
//! Subsets are the English files, one per construction; the two `*_mini.json` files (4-item
//! excerpts of `nounpp_english` and `simple_english`) and the Italian ones are left out. Items
//! that are not one correct and one wrong target are skipped and listed. Choices are in sorted
//! order, then the gold one is moved to position `hash(id) % 2`, so its position carries no
//! information. [`SAMPLE`] items are drawn, stratified by subset with proportional allocation
//! ([`allocate`]), within a subset the items of smallest sha256 of (seed, id) ([`crate::subsample`]).

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crate::{Choice, Example};

/// Where `just data` unpacks the task, under the raw folder.
pub const DIR: &str = "bigbench/bigbench-1.0.0/bigbench/benchmark_tasks/subject_verb_agreement";
/// Examples in the task file.
pub const SAMPLE: usize = 5_000;
/// Seed of the within-subset draw.
pub const SEED: u64 = 13;

#[derive(Deserialize)]
struct TaskFile {
    examples: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    input: String,
    target_scores: BTreeMap<String, f64>,
}

/// How the sample was drawn, recorded in `data/tasks/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seed: u64,
    /// Well-formed items over all subsets.
    pub population: usize,
    /// Per subset (file stem): [items, drawn].
    pub subsets: BTreeMap<String, [usize; 2]>,
    /// Ids of the items skipped as malformed.
    pub skipped: Vec<String>,
}

/// Reads every English subset under `dir`, draws [`SAMPLE`] examples; they come out in subset
/// order, then in file order, with ids `bigbench_sva/<subset>/<index in file>`.
pub fn build(dir: &Path) -> Result<(Vec<Example>, Sample)> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list; run `just data` to fetch bigbench==1.0.0", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json") && n.contains("_english") && !n.ends_with("_mini.json"))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("{}: no `*_english*.json` subset files", dir.display());
    }
    let mut subsets = Vec::new();
    let mut skipped = Vec::new();
    for name in &names {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        let (examples, bad) = parse_subset(name.trim_end_matches(".json"), &text)
            .with_context(|| format!("{}: not a BIG-bench task file", path.display()))?;
        if examples.is_empty() {
            bail!("{}: no well-formed two-way item", path.display());
        }
        skipped.extend(bad);
        subsets.push((name.trim_end_matches(".json").to_string(), examples));
    }
    let quotas = allocate(&subsets.iter().map(|s| s.1.len()).collect::<Vec<_>>(), SAMPLE);
    let mut out = Vec::new();
    let mut sample = Sample { seed: SEED, population: 0, subsets: BTreeMap::new(), skipped };
    for ((name, examples), quota) in subsets.into_iter().zip(quotas) {
        let drawn: HashSet<String> = crate::subsample(&examples, quota, SEED).into_iter().map(|e| e.id).collect();
        sample.population += examples.len();
        sample.subsets.insert(name, [examples.len(), quota]);
        out.extend(examples.into_iter().filter(|e| drawn.contains(&e.id)));
    }
    Ok((out, sample))
}

/// The examples of one subset file and the ids of its malformed items (not exactly two
/// targets, or not one scored 1 and one scored 0).
fn parse_subset(subset: &str, text: &str) -> Result<(Vec<Example>, Vec<String>)> {
    let file: TaskFile = serde_json::from_str(text)?;
    let mut examples = Vec::new();
    let mut skipped = Vec::new();
    for (i, item) in file.examples.into_iter().enumerate() {
        let id = format!("bigbench_sva/{subset}/{i}");
        let targets: Vec<(String, f64)> = item.target_scores.into_iter().collect();
        let scores: Vec<f64> = targets.iter().map(|t| t.1).collect();
        let Some(right) = scores.iter().position(|&s| s == 1.0).filter(|_| scores.len() == 2 && scores.contains(&0.0))
        else {
            skipped.push(id);
            continue;
        };
        let mut continuations: Vec<String> = targets.into_iter().map(|t| t.0).collect();
        let gold = (crate::hash64(&id) % 2) as usize;
        let correct = continuations.remove(right);
        continuations.insert(gold, correct);
        let choices = continuations
            .into_iter()
            .map(|continuation| Choice { context: item.input.clone(), continuation })
            .collect();
        examples.push(Example { id, choices, gold });
    }
    Ok((examples, skipped))
}

/// Proportional allocation of `n` draws over strata of the given sizes, by largest remainder:
/// each stratum gets the floor of its share, the draws left over go to the largest fractional
/// parts (ties to the earlier stratum). Takes everything when `n` is not smaller than the total.
pub fn allocate(sizes: &[usize], n: usize) -> Vec<usize> {
    let total: usize = sizes.iter().sum();
    if n >= total {
        return sizes.to_vec();
    }
    let mut quotas: Vec<usize> = sizes.iter().map(|&s| s * n / total).collect();
    let mut by_remainder: Vec<usize> = (0..sizes.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(sizes[i] * n % total)); // stable: ties keep stratum order
    for &i in by_remainder.iter().take(n - quotas.iter().sum::<usize>()) {
        quotas[i] += 1;
    }
    quotas
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"{"canary": "x", "name": "nounpp", "examples": [
        {"input": "The athlete behind the bike ", "target_scores": {"approves": 1, "approve": 0}, "comment": "singular_singular"},
        {"input": "The athletes behind the bike ", "target_scores": {"approve": 1, "approves": 0}},
        {"input": "the foal now ", "target_scores": {"brings the trail.": 1, "bring the trail.": 0}},
        {"input": "broken item ", "target_scores": {"only one target": 0}},
        {"input": "two golds ", "target_scores": {"a": 1, "b": 1}}
    ]}"#;

    #[test]
    fn items_become_two_way_choices_with_the_scored_target_as_gold() {
        let (ex, skipped) = parse_subset("nounpp_english", FIXTURE).unwrap();
        assert_eq!(skipped, vec!["bigbench_sva/nounpp_english/3", "bigbench_sva/nounpp_english/4"]);
        let right = ["approves", "approve", "brings the trail."];
        assert_eq!(ex.len(), 3);
        for (i, e) in ex.iter().enumerate() {
            assert_eq!(e.id, format!("bigbench_sva/nounpp_english/{i}"));
            assert_eq!(e.choices.len(), 2);
            assert_eq!(e.choices[e.gold].continuation, right[i]);
            assert_ne!(e.choices[0].continuation, e.choices[1].continuation);
            assert!(
                e.choices.iter().all(|c| c.context.ends_with(' ') && !c.continuation.starts_with(' ')),
                "raw strings kept"
            );
        }
        assert_eq!(ex[0].choices[0].context, "The athlete behind the bike ");
        assert!(parse_subset("x", "[]").is_err());
    }

    #[test]
    fn gold_position_is_balanced_whatever_the_file_order() {
        let items: Vec<String> = (0..400)
            .map(|i| format!(r#"{{"input": "The dog{i} ", "target_scores": {{"barks": 1, "bark": 0}}}}"#))
            .collect();
        let (ex, _) = parse_subset("s", &format!(r#"{{"examples": [{}]}}"#, items.join(","))).unwrap();
        let first = ex.iter().filter(|e| e.gold == 0).count();
        assert!((160..240).contains(&first), "gold first in {first} of 400");
    }

    #[test]
    fn allocation_is_proportional_and_sums_to_n() {
        assert_eq!(allocate(&[600, 500, 4096], 1000), vec![116, 96, 788]);
        assert_eq!(allocate(&[1, 1, 1], 2), vec![1, 1, 0]);
        assert_eq!(allocate(&[3, 4], 10), vec![3, 4]);
        let sizes = [1800, 1200, 1800, 5824, 5600, 499, 4096, 4096, 1800, 2400, 2400, 4096, 4096, 4096, 4096, 600];
        let q = allocate(&sizes, SAMPLE);
        assert_eq!(q.iter().sum::<usize>(), SAMPLE);
        let total: usize = sizes.iter().sum();
        for (s, q) in sizes.iter().zip(&q) {
            assert!((*q as f64 - (s * SAMPLE) as f64 / total as f64).abs() < 1.0, "{s} -> {q}");
        }
    }

    #[test]
    fn build_draws_the_sample_from_english_subsets_only() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", build(&dir.path().join("missing")).unwrap_err());
        assert!(err.contains("missing: cannot list") && err.contains("just data"), "{err}");
        std::fs::write(dir.path().join("nounpp_english.json"), FIXTURE).unwrap();
        std::fs::write(dir.path().join("nounpp_english_mini.json"), FIXTURE).unwrap();
        std::fs::write(dir.path().join("long_nested_inner_italian.json"), FIXTURE).unwrap();
        let (ex, sample) = build(dir.path()).unwrap();
        assert_eq!(ex.len(), 3);
        assert_eq!(sample.subsets, BTreeMap::from([("nounpp_english".to_string(), [3, 3])]));
        assert_eq!((sample.population, sample.skipped.len()), (3, 2));
        std::fs::write(dir.path().join("bad_english.json"), "{\"examples\": 3}").unwrap();
        let err = format!("{:#}", build(dir.path()).unwrap_err());
        assert!(err.contains("bad_english.json: not a BIG-bench task file"), "{err}");
    }
}
