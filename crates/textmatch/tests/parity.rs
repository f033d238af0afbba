//! Parity with the Python originals: every pair of `fixtures/char_f1_reference.jsonl` and every
//! case of `fixtures/exact_match_multi_reference.jsonl`, written by
//! `scripts/textmatch_reference.py` from llm-jp-eval's normalisation, fuzzywuzzy 0.18.0 with
//! python-Levenshtein 0.27.5, and lm-eval 0.4.13's `exact_match_hf_evaluate`, scored here and
//! compared to 1e-9 (the scores are in fact equal: the same `f64` operations in the same order).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use textmatch::{
    char_f1, exact_match, exact_match_multi_target, indel_ratio, nfkc, process_and_sort, token_sort_ratio,
    ExactMatchOptions, IgnoreRegex,
};

const TOLERANCE: f64 = 1e-9;
const GSM8K: &[&str] = &[",", r"\$", "(?s).*#### ", r"\.$"];

/// The option sets of the script's `EM_VARIANTS`, by name (ignore_case, ignore_punctuation,
/// ignore_numbers, regexes_to_ignore).
fn variants() -> BTreeMap<&'static str, ExactMatchOptions> {
    let o = |case: bool, punct: bool, numbers: bool, regexes: &[&str]| ExactMatchOptions {
        ignore_case: case,
        ignore_punctuation: punct,
        ignore_numbers: numbers,
        regexes_to_ignore: regexes.iter().map(|p| IgnoreRegex::new(p).unwrap()).collect(),
    };
    BTreeMap::from([
        ("plain", o(false, false, false, &[])),
        ("case", o(true, false, false, &[])),
        ("punct", o(false, true, false, &[])),
        ("case_punct", o(true, true, false, &[])),
        ("numbers", o(false, false, true, &[])),
        ("gsm8k", o(false, false, false, GSM8K)),
        ("strip_ws_case", o(true, false, false, &[r"^\s+", r"\s+$"])),
        ("articles", o(true, true, false, &[r"\b(?:The |the |An |A |The |a |an )"])),
        ("all", o(true, true, true, GSM8K)),
    ])
}

#[derive(Deserialize)]
struct Pair {
    kind: String,
    pred: String,
    gold: String,
    sorted_pred: String,
    sorted_gold: String,
    indel_ratio: f64,
    token_sort_ratio: u32,
    char_f1: f64,
    exact_match: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct Multi {
    kind: String,
    pred: String,
    golds: Vec<String>,
    exact_match: BTreeMap<String, f64>,
    char_f1_best: f64,
}

fn read<T: for<'de> Deserialize<'de>>(name: &str) -> Vec<T> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split('\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1)))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE
}

#[test]
fn textmatch_parity_char_f1_and_exact_match_with_python() {
    let pairs: Vec<Pair> = read("char_f1_reference.jsonl");
    assert!(pairs.len() >= 1000, "only {} pairs in the fixture", pairs.len());
    let variants = variants();
    let mut failures = vec![];
    for (i, p) in pairs.iter().enumerate() {
        let at = format!("line {} ({}): pred {:?} gold {:?}", i + 1, p.kind, p.pred, p.gold);
        let (sp, sg) = (process_and_sort(&nfkc(&p.pred), true), process_and_sort(&nfkc(&p.gold), true));
        if (sp.as_str(), sg.as_str()) != (p.sorted_pred.as_str(), p.sorted_gold.as_str()) {
            failures.push(format!(
                "{at}: processed and sorted: rust ({sp:?}, {sg:?}), python ({:?}, {:?})",
                p.sorted_pred, p.sorted_gold
            ));
        }
        let ir = indel_ratio(&p.sorted_pred, &p.sorted_gold);
        if !close(ir, p.indel_ratio) {
            failures.push(format!("{at}: Levenshtein.ratio: rust {ir:?}, python {:?}", p.indel_ratio));
        }
        let tsr = token_sort_ratio(&nfkc(&p.pred), &nfkc(&p.gold));
        if tsr != p.token_sort_ratio {
            failures.push(format!("{at}: token_sort_ratio: rust {tsr}, python {}", p.token_sort_ratio));
        }
        let cf = char_f1(&p.pred, &p.gold);
        if !close(cf, p.char_f1) {
            failures.push(format!("{at}: char_f1: rust {cf:?}, python {:?}", p.char_f1));
        }
        let names: Vec<&str> = p.exact_match.keys().map(String::as_str).collect();
        assert_eq!(names, variants.keys().copied().collect::<Vec<_>>(), "{at}: the exact_match option sets");
        for (name, options) in &variants {
            let em = exact_match(&p.pred, &p.gold, options).unwrap();
            if !close(em, p.exact_match[*name]) {
                failures.push(format!("{at}: exact_match {name}: rust {em}, python {}", p.exact_match[*name]));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} pairs differ:\n{}", failures.len(), pairs.len(), failures.join("\n"));
}

#[test]
fn textmatch_parity_multiple_targets_with_python() {
    let cases: Vec<Multi> = read("exact_match_multi_reference.jsonl");
    assert!(cases.len() >= 50, "only {} cases in the fixture", cases.len());
    let variants = variants();
    let mut failures = vec![];
    for (i, c) in cases.iter().enumerate() {
        let at = format!("line {} ({}): pred {:?} golds {:?}", i + 1, c.kind, c.pred, c.golds);
        for (name, options) in &variants {
            let em = exact_match_multi_target(&c.pred, &c.golds, options).unwrap();
            if !close(em, c.exact_match[*name]) {
                failures.push(format!("{at}: exact_match {name}: rust {em}, python {}", c.exact_match[*name]));
            }
        }
        let best = textmatch::best_of(&c.pred, &c.golds, char_f1);
        if !close(best, c.char_f1_best) {
            failures.push(format!("{at}: best char_f1: rust {best}, python {}", c.char_f1_best));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
