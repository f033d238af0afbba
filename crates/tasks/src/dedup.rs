//! Train-set overlap filter for the held-out probes: an example is dropped when the text of any
//! of its choices (context + continuation) shares a word-level 13-gram with the training text.
//!
//! Words are whitespace tokens, lower-cased, with everything but letters and digits removed
//! (tokens left empty are skipped), so case and punctuation do not hide an overlap. A text of
//! fewer than 13 words counts as overlapping when it occurs whole in a training paragraph.
//! n-grams do not cross paragraphs (blank lines). Only the examples' n-grams are kept in memory,
//! as u64 hashes; the training text is streamed past them once.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};

use crate::Example;

/// The n of the n-gram overlap test (as in GPT-3's contamination study).
pub const NGRAM: usize = 13;

/// What the filter did to one task, recorded in `data/tasks/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overlap {
    pub ngram: usize,
    /// Examples built before the filter.
    pub candidates: usize,
    /// Examples dropped for sharing an n-gram with the training text.
    pub removed: usize,
    /// removed / candidates.
    pub share: f64,
}

/// Drops from each task the examples that overlap `train`; returns what was dropped, per task.
pub fn drop_overlapping(tasks: &mut [&mut Vec<Example>], train: &str) -> Vec<Overlap> {
    let grams: Vec<Vec<Vec<Gram>>> = tasks.iter().map(|t| t.iter().map(example_grams).collect()).collect();
    let wanted: HashSet<u64> = grams.iter().flatten().flatten().map(|g| g.hash).collect();
    let lengths: BTreeSet<usize> = grams.iter().flatten().flatten().map(|g| g.len).collect();
    let found = grams_in(train, &wanted, &lengths);
    tasks
        .iter_mut()
        .zip(grams)
        .map(|(examples, grams)| {
            let candidates = examples.len();
            let mut keep = grams.iter().map(|g| !g.iter().any(|g| found.contains(&g.hash)));
            examples.retain(|_| keep.next().unwrap());
            let removed = candidates - examples.len();
            Overlap {
                ngram: NGRAM,
                candidates,
                removed,
                share: if candidates == 0 { 0.0 } else { removed as f64 / candidates as f64 },
            }
        })
        .collect()
}

struct Gram {
    len: usize,
    hash: u64,
}

/// The n-grams of every choice's text: its 13-grams, or the whole text if it is shorter.
fn example_grams(e: &Example) -> Vec<Gram> {
    let mut out = Vec::new();
    for c in &e.choices {
        let w = word_hashes(&format!("{} {}", c.context, c.continuation));
        let len = w.len().min(NGRAM);
        if len > 0 {
            out.extend(w.windows(len).map(|win| Gram { len, hash: gram_hash(win) }));
        }
    }
    out
}

/// The hashes among `wanted` that some paragraph of `text` holds, trying each length in `lengths`.
fn grams_in(text: &str, wanted: &HashSet<u64>, lengths: &BTreeSet<usize>) -> HashSet<u64> {
    let mut found = HashSet::new();
    for para in text.split("\n\n") {
        let w = word_hashes(para);
        for &len in lengths {
            found.extend(w.windows(len).map(gram_hash).filter(|h| wanted.contains(h)));
        }
    }
    found
}

fn word_hashes(text: &str) -> Vec<u64> {
    text.split_whitespace()
        .map(|t| t.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>())
        .filter(|w| !w.is_empty())
        .map(|w| w.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))) // FNV-1a
        .collect()
}

/// Hash of a sequence of word hashes, its length included (splitmix64 finaliser at each step).
fn gram_hash(words: &[u64]) -> u64 {
    words.iter().fold(words.len() as u64, |h, &w| {
        let mut z = (h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Choice;

    fn ex(id: &str, context: &str, continuation: &str) -> Example {
        Example {
            id: id.into(),
            choices: vec![Choice { context: context.into(), continuation: continuation.into() }],
            gold: 0,
        }
    }

    #[test]
    fn examples_sharing_a_13_gram_with_train_are_dropped() {
        let train = "Zero one two three four five six seven eight nine ten eleven twelve thirteen.\n\n\
                     Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron";
        let mut probe = vec![
            // 13 consecutive training words, across the context/continuation seam, other case and punctuation
            ex("p/0", "So: ONE, two three four five six seven", " eight nine ten eleven twelve THIRTEEN! And more."),
            // 12 of them only
            ex("p/1", "one two three four five six seven eight nine ten eleven twelve", " fourteen fifteen"),
            // 13 words that span the paragraph break of train
            ex("p/2", "eight nine ten eleven twelve thirteen alpha beta gamma delta epsilon zeta eta", " now"),
            // shorter than 13 words and whole inside a training paragraph
            ex("p/3", "theta iota kappa", " lambda"),
            // shorter than 13 words, not in train
            ex("p/4", "theta kappa iota", " lambda"),
        ];
        let mut other = vec![ex("q/0", "", "epsilon zeta eta theta iota kappa lambda mu nu xi omicron and so on")];
        let report = drop_overlapping(&mut [&mut probe, &mut other], train);
        let ids: Vec<&str> = probe.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, vec!["p/1", "p/2", "p/4"]);
        assert_eq!(report[0], Overlap { ngram: 13, candidates: 5, removed: 2, share: 0.4 });
        assert_eq!((other.len(), report[1].removed), (1, 0), "11 training words plus two others");
    }

    #[test]
    fn any_choice_can_carry_the_overlap() {
        let train = (0..20).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        let copied = (5..18).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        let mut e = ex("p/0", "fresh context", " fresh ending");
        e.choices.push(Choice { context: "fresh context".into(), continuation: copied });
        let mut probe = vec![e];
        assert_eq!(drop_overlapping(&mut [&mut probe], &train)[0].removed, 1);
    }
}
