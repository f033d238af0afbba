//! lm-evaluation-harness's `exact_match` (0.4.13, `lm_eval/api/metrics.py`
//! `exact_match_hf_evaluate`), its rule for several targets (`lm_eval/api/task.py`
//! `ConfigurableTask.process_results`, `generate_until`), and the best score over several golds.

use std::borrow::Cow;

use crate::{pyregex, Error};

/// One of lm-eval's `regexes_to_ignore`: a Python `re` pattern, compiled once. Each match is
/// deleted (`re.sub(s, "", x)`). The pattern is rewritten where Python and Rust read it
/// differently (`$` before a final newline, `\Z`, `\w`, `\s`, `\b`: see [`IgnoreRegex::new`]).
#[derive(Clone, Debug)]
pub struct IgnoreRegex {
    pattern: String,
    regex: fancy_regex::Regex,
}

impl IgnoreRegex {
    /// Compiles the Python pattern `pattern` (as written in an lm-eval task's YAML). Python's `$`
    /// (end of text or before a final newline), `\Z`, and its `\w`/`\W`/`\b`/`\B` (L*, N*, `_`)
    /// and `\s`/`\S` (White_Space and U+001C..=U+001F) are rewritten to mean what they mean in
    /// Python; Python-only syntax that Rust lacks (`(?a)`, `\N{...}`, a bare `{`) is an error.
    pub fn new(pattern: &str) -> Result<Self, Error> {
        let translated = pyregex::translate(pattern);
        let regex = fancy_regex::Regex::new(&translated).map_err(|e| Error::Regex {
            pattern: pattern.to_string(),
            translated: translated.clone(),
            source: Box::new(e),
        })?;
        Ok(Self { pattern: pattern.to_string(), regex })
    }

    /// The Python pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    fn delete_matches<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, Error> {
        self.regex.try_replacen(text, 0, "").map_err(|e| Error::Regex {
            pattern: self.pattern.clone(),
            translated: self.regex.as_str().to_string(),
            source: Box::new(e),
        })
    }
}

/// lm-eval's `exact_match` keyword arguments (`metric_list: - metric: exact_match` in a task's
/// YAML). `Default` is lm-eval's default: all off, no regexes.
#[derive(Clone, Debug, Default)]
pub struct ExactMatchOptions {
    pub ignore_case: bool,
    pub ignore_punctuation: bool,
    pub ignore_numbers: bool,
    /// Applied in order, each to the result of the one before. An empty list is taken as
    /// lm-eval's `None`; lm-eval itself, given `[]` and no other option, compares the Python
    /// strings without numpy, which differs only for texts ending in NUL characters.
    pub regexes_to_ignore: Vec<IgnoreRegex>,
}

/// A numpy array of `str` (dtype `<U{width}`) as `exact_match_hf_evaluate` builds it: the width is
/// the longest element in characters, and an element reads back without its trailing NULs.
struct StrArray {
    values: Vec<String>,
    width: usize,
}

impl StrArray {
    fn new<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Self {
        let mut width = 0;
        let values = texts
            .into_iter()
            .map(|t| {
                let t = t.as_ref();
                width = width.max(t.chars().count());
                t.trim_end_matches('\0').to_string()
            })
            .collect();
        Self { values, width }
    }

    /// `np.char.lower`: Python's `str.lower` on each element, cut to the array's width (the one
    /// character that lengthens, `İ` -> `i` + U+0307, can lose its dot).
    fn lower(&mut self) {
        for v in &mut self.values {
            let lowered = v.to_lowercase();
            *v = match lowered.char_indices().nth(self.width) {
                Some((cut, _)) => lowered[..cut].to_string(),
                None => lowered,
            };
        }
    }

    /// `np.char.translate` with a table that deletes the characters for which `drop` holds.
    fn delete(&mut self, drop: impl Fn(char) -> bool) {
        for v in &mut self.values {
            v.retain(|c| !drop(c));
        }
    }
}

/// lm-eval's `exact_match_hf_evaluate(predictions, references, **options)`, step for step:
/// each regex of `regexes_to_ignore` deleted from every text, in order (`re.sub(s, "", x)`, the
/// arrays rebuilt with `np.array` after each); then `np.char.lower` if `ignore_case`; then
/// `string.punctuation` (ASCII ``!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~``) deleted if
/// `ignore_punctuation`; then `string.digits` deleted if `ignore_numbers`; then the share of
/// positions where the two arrays are equal (`np.mean(predictions == references)`). numpy's
/// `<U` arrays are modelled: trailing NULs do not count, and lowercasing is cut to the array's
/// width. `NaN` for two empty lists (numpy's mean of nothing).
pub fn exact_match_hf_evaluate<P: AsRef<str>, R: AsRef<str>>(
    predictions: &[P],
    references: &[R],
    options: &ExactMatchOptions,
) -> Result<f64, Error> {
    if predictions.len() != references.len() {
        return Err(Error::Lengths { predictions: predictions.len(), references: references.len() });
    }
    let (mut preds, mut refs) = (array_after_regexes(predictions, options)?, array_after_regexes(references, options)?);
    if options.ignore_case {
        preds.lower();
        refs.lower();
    }
    if options.ignore_punctuation {
        preds.delete(|c| c.is_ascii_punctuation());
        refs.delete(|c| c.is_ascii_punctuation());
    }
    if options.ignore_numbers {
        preds.delete(|c| c.is_ascii_digit());
        refs.delete(|c| c.is_ascii_digit());
    }
    let equal = preds.values.iter().zip(&refs.values).filter(|(p, r)| p == r).count();
    Ok(equal as f64 / predictions.len() as f64)
}

fn array_after_regexes<S: AsRef<str>>(texts: &[S], options: &ExactMatchOptions) -> Result<StrArray, Error> {
    let mut current: Vec<String> = texts.iter().map(|t| t.as_ref().to_string()).collect();
    let mut regexes = options.regexes_to_ignore.iter();
    let Some(first) = regexes.next() else {
        return Ok(StrArray::new(current));
    };
    // the first `re.sub` sees the Python strings as given (trailing NULs too); every later one
    // sees the elements of the array the one before built
    let mut array = StrArray::new(current.iter().map(|t| first.delete_matches(t)).collect::<Result<Vec<_>, _>>()?);
    for regex in regexes {
        current = array.values;
        array = StrArray::new(current.iter().map(|t| regex.delete_matches(t)).collect::<Result<Vec<_>, _>>()?);
    }
    Ok(array)
}

/// lm-eval's `exact_match` of one prediction against one gold: 1.0 or 0.0
/// ([`exact_match_hf_evaluate`] of two one-element lists).
pub fn exact_match(pred: &str, gold: &str, options: &ExactMatchOptions) -> Result<f64, Error> {
    exact_match_hf_evaluate(&[pred], &[gold], options)
}

/// lm-eval's `exact_match` for a task whose target is a list (`multiple_target`): the
/// prediction repeated once per gold, [`exact_match_hf_evaluate`] over the lists, 1.0 if the mean
/// is above 0 (any gold matches). For exact match this equals [`best_of`] with [`exact_match`],
/// except where `ignore_case` meets `İ` (numpy cuts the lowered golds to the longest gold's
/// width, not to each gold's own). 0.0 for no golds (lm-eval: `nan > 0.0` is false; with
/// `ignore_case`, `ignore_punctuation` or `ignore_numbers` lm-eval raises on the empty array).
pub fn exact_match_multi_target<S: AsRef<str>>(
    pred: &str,
    golds: &[S],
    options: &ExactMatchOptions,
) -> Result<f64, Error> {
    if golds.is_empty() {
        return Ok(0.0);
    }
    let preds = vec![pred; golds.len()];
    let mean = exact_match_hf_evaluate(&preds, golds, options)?;
    Ok(if mean > 0.0 { 1.0 } else { 0.0 })
}

/// The best score of `pred` over several golds: the maximum of `score(pred, gold)`, 0.0 for no
/// golds. lm-eval, for a target list, takes "any": 1.0 if any gold scores above 0, else 0.0
/// (`process_results`, "TODO: this may break for multiple_target, non zero-or-1 metrics"); for
/// 0/1 scores such as exact match the two agree, for a soft score such as [`crate::char_f1`] the
/// maximum is the meaningful one (SQuAD's `metric_max_over_ground_truths`), and llm-jp-eval has
/// one gold per example.
pub fn best_of<S: AsRef<str>>(pred: &str, golds: &[S], mut score: impl FnMut(&str, &str) -> f64) -> f64 {
    golds
        .iter()
        .map(|g| score(pred, g.as_ref()))
        .fold(None, |best: Option<f64>, s| Some(best.map_or(s, |b| b.max(s))))
        .unwrap_or(0.0)
}

#[cfg(test)]
mod textmatch_tests {
    use super::*;
    use crate::char_f1;

    fn opts(case: bool, punct: bool, regexes: &[&str]) -> ExactMatchOptions {
        ExactMatchOptions {
            ignore_case: case,
            ignore_punctuation: punct,
            ignore_numbers: false,
            regexes_to_ignore: regexes.iter().map(|p| IgnoreRegex::new(p).unwrap()).collect(),
        }
    }

    #[test]
    fn plain_is_string_equality() {
        let o = ExactMatchOptions::default();
        assert_eq!(exact_match("Paris", "Paris", &o).unwrap(), 1.0);
        assert_eq!(exact_match("paris", "Paris", &o).unwrap(), 0.0);
        assert_eq!(exact_match("Paris ", "Paris", &o).unwrap(), 0.0);
        assert_eq!(exact_match("", "", &o).unwrap(), 1.0);
        // numpy's <U arrays drop trailing NULs
        assert_eq!(exact_match("a\0", "a", &o).unwrap(), 1.0);
        assert_eq!(exact_match("\0a", "a", &o).unwrap(), 0.0);
    }

    #[test]
    fn case_and_punctuation() {
        assert_eq!(exact_match("PARIS.", "paris", &opts(true, true, &[])).unwrap(), 1.0);
        assert_eq!(exact_match("PARIS.", "paris", &opts(true, false, &[])).unwrap(), 0.0);
        // only ASCII punctuation: the Japanese full stop stays
        assert_eq!(exact_match("東京。", "東京", &opts(false, true, &[])).unwrap(), 0.0);
        assert_eq!(exact_match("東京!", "東京", &opts(false, true, &[])).unwrap(), 1.0);
        // `_` is in string.punctuation
        assert_eq!(exact_match("a_b", "ab", &opts(false, true, &[])).unwrap(), 1.0);
        let numbers = ExactMatchOptions { ignore_numbers: true, ..Default::default() };
        assert_eq!(exact_match("a1b2", "ab", &numbers).unwrap(), 1.0);
        // full-width digits are not string.digits
        assert_eq!(exact_match("a１", "a", &numbers).unwrap(), 0.0);
    }

    #[test]
    fn lowering_is_cut_to_the_array_width() {
        // "İ" lowers to "i" + U+0307, two characters in a one-character array: the dot is lost
        assert_eq!(exact_match("İ", "i", &opts(true, false, &[])).unwrap(), 1.0);
        assert_eq!(exact_match("İx", "i\u{307}x", &opts(true, false, &[])).unwrap(), 0.0);
        // multiple targets: the golds' array is as wide as its longest gold
        let golds = ["i", "longer gold"];
        assert_eq!(exact_match_multi_target("i\u{307}", &["İ"], &opts(true, false, &[])).unwrap(), 0.0);
        assert_eq!(exact_match_multi_target("i\u{307}", &["İ", "longer"], &opts(true, false, &[])).unwrap(), 1.0);
        assert_eq!(exact_match_multi_target("I", &golds, &opts(true, false, &[])).unwrap(), 1.0);
    }

    #[test]
    fn gsm8k_regexes() {
        let o = opts(false, false, &[",", r"\$", "(?s).*#### ", r"\.$"]);
        assert_eq!(exact_match("Step 1...\n#### $1,234.", "1234", &o).unwrap(), 1.0);
        assert_eq!(exact_match("1,234.\n", "1234\n", &o).unwrap(), 1.0);
        assert_eq!(exact_match("1,235", "1234", &o).unwrap(), 0.0);
    }

    #[test]
    fn batches() {
        let o = ExactMatchOptions::default();
        assert_eq!(exact_match_hf_evaluate(&["a", "b", "c", "d"], &["a", "x", "c", "y"], &o).unwrap(), 0.5);
        assert!(exact_match_hf_evaluate::<&str, &str>(&[], &[], &o).unwrap().is_nan());
        assert!(matches!(exact_match_hf_evaluate(&["a"], &["a", "b"], &o), Err(Error::Lengths { .. })));
        assert!(matches!(IgnoreRegex::new("(unclosed"), Err(Error::Regex { .. })));
    }

    #[test]
    fn best_of_takes_the_maximum() {
        let golds = ["the cat", "a cat sat", "dog"];
        assert_eq!(best_of("cat sat", &golds, char_f1), char_f1("cat sat", "a cat sat"));
        assert_eq!(best_of::<&str>("x", &[], char_f1), 0.0);
        let o = ExactMatchOptions::default();
        let em = |p: &str, g: &str| exact_match(p, g, &o).unwrap();
        assert_eq!(best_of("dog", &golds, em), 1.0);
        assert_eq!(best_of("cow", &golds, em), 0.0);
        assert_eq!(exact_match_multi_target("dog", &golds, &o).unwrap(), 1.0);
        assert_eq!(exact_match_multi_target::<&str>("dog", &[], &o).unwrap(), 0.0);
    }
}
