//! `textmatch`: per-example scores of generated text, computed as the two harnesses compute them,
//! so that a checkpoint's generated answers can be scored (and consecutive checkpoints' answers
//! compared) without Python.
//!
//! - [`char_f1`]: llm-jp-eval's `char_f1`, the soft match the paper (Nishida et al., EMNLP Findings
//!   2025) scores generation tasks with and compares consecutive checkpoints' texts by:
//!   NFKC on both texts, then fuzzywuzzy's [`token_sort_ratio`] with its defaults, divided by 100;
//! - [`exact_match`]: lm-evaluation-harness's `exact_match` (`exact_match_hf_evaluate`) with its
//!   `ignore_case`, `ignore_punctuation`, `ignore_numbers` and `regexes_to_ignore` options
//!   ([`ExactMatchOptions`]);
//! - [`best_of`]: the best score over several gold answers; [`exact_match_multi_target`] is
//!   lm-eval's own rule for a task with several targets.
//!
//! # What each step follows
//!
//! llm-jp-eval, `src/llm_jp_eval/utils.py` (v1.x):
//! 1. `normalize(input_str)`: `unicodedata.normalize("NFKC", input_str)`, applied by the evaluator
//!    to the prediction and to the gold before any metric ([`nfkc`]);
//! 2. `char_f1(y_pred, y_true)`: `fuzz.token_sort_ratio(y_pred, y_true) / 100.0` ([`char_f1`]).
//!
//! The llm-jp-eval repository itself could not be read from the environment this crate was
//! written in; the two functions above were read in verbatim copies of that `utils.py` in public
//! forks, and `scripts/textmatch_reference.py` carries them with that note. What llm-jp-eval does
//! to the generated text *before* these two steps (taking the answer out of the generation) is
//! not part of the score and is not done here: pass the answer text.
//!
//! fuzzywuzzy 0.18.0 (`fuzzywuzzy/fuzz.py`, `utils.py`, `string_processing.py`, `StringMatcher.py`):
//! 3. `fuzz.token_sort_ratio(s1, s2, force_ascii=True, full_process=True)` calls
//!    `_token_sort(partial=False)`, which calls `_process_and_sort` on each side
//!    ([`process_and_sort`]):
//!    - `utils.full_process(s, force_ascii=True)` ([`full_process`]):
//!      a. `asciidammit(s)`: on Python 3 a `str` goes to `asciionly`, `s.translate(...)` with a
//!      table that deletes the characters U+0080..=U+00FF **only** (`bad_chars`): Latin-1 letters
//!      such as `é`, `ü`, `ß`, `ø` vanish (joining their neighbours: `café` -> `caf`), while
//!      Japanese, Greek, emoji and everything above U+00FF stay. "force ascii" is a misnomer on
//!      Python 3, and this is what makes `char_f1` work on Japanese at all;
//!      b. `StringProcessor.replace_non_letters_non_numbers_with_whitespace`: the regex
//!      `(?ui)\W` replaced by one space per character. Python's Unicode `\w` is exactly the
//!      characters of general category L* or N* and `_` (checked over every code point of
//!      Python 3.11's tables); everything else (punctuation, symbols, emoji, marks, controls,
//!      unassigned) becomes a space;
//!      c. `str.lower` (full case mapping with Final_Sigma, as Rust's [`str::to_lowercase`]): after
//!      (a) and (b), so `Ÿ` (U+0178) becomes `ÿ` (U+00FF) and stays, and `İ` becomes `i` + U+0307;
//!      d. `str.strip`;
//!    - `ts.split()`, `" ".join(sorted(tokens)).strip()`: tokens sorted by code point (the byte
//!      order of UTF-8, as Rust sorts `str`), repeated tokens kept;
//! 4. `fuzz.ratio(sorted1, sorted2)` ([`ratio`]) under its decorators, in this order:
//!    `check_for_none`, `check_for_equivalence` (equal strings score 100, so two texts that are
//!    both empty after processing score 100: `char_f1("", "") == 1.0`, `char_f1("!!", "?") ==
//!    1.0`), `check_empty_string` (one empty side scores 0);
//! 5. `SequenceMatcher` is `StringMatcher.StringMatcher` when python-Levenshtein is installed (the
//!    pure-Python `difflib` fallback gives other numbers: the reference pins python-Levenshtein);
//!    its `ratio()` is `Levenshtein.ratio`, which in python-Levenshtein 0.27.5 (`Levenshtein/
//!    __init__.py`) is `rapidfuzz.distance.Indel.normalized_similarity`: `1.0 - dist / (len1 +
//!    len2)` in `f64`, `dist` the insertion/deletion distance over code points ([`indel_ratio`]);
//! 6. `utils.intr(100 * m.ratio())`: `int(round(x))`, Python's `round`, which rounds halves to
//!    even (`62.5 -> 62`, `87.5 -> 88`) on the `f64` product, as [`f64::round_ties_even`].
//!
//! lm-evaluation-harness 0.4.13, `lm_eval/api/metrics.py` `exact_match_hf_evaluate` and
//! `lm_eval/api/task.py` `ConfigurableTask.process_results` (`generate_until`): see
//! [`exact_match_hf_evaluate`] and [`exact_match_multi_target`].
//!
//! # Why rapidfuzz
//!
//! The edit distance is the `rapidfuzz` crate's `distance::indel`, not code of our own: it is
//! the Rust port, by the same author, of the C++ library (rapidfuzz-cpp) that python-Levenshtein
//! 0.27 and RapidFuzz call, with the same formula for the normalised similarity (`1.0 -
//! dist as f64 / (len1 + len2) as f64`, `details/distance.rs`), so the `f64` that is multiplied
//! by 100 and rounded is the same number, bit for bit, and the rounding at .5 agrees. It is
//! maintained, has no dependencies, and is bit-parallel (fast on long generations).
//!
//! # Unicode versions
//!
//! Python's `unicodedata` follows the interpreter (Unicode 14.0 in Python 3.11, which made the
//! reference fixture); `unicode-normalization` and `unicode-properties` here carry Unicode 18.0 and
//! Rust's `to_lowercase` its own. Scores differ only on characters assigned after Unicode 14.0
//! (2021), which a Python 3.11 harness sees as unassigned (`\W`, a space).

mod exact;
mod fuzz;
mod pyregex;

pub use exact::{
    best_of, exact_match, exact_match_hf_evaluate, exact_match_multi_target, ExactMatchOptions, IgnoreRegex,
};
pub use fuzz::{char_f1, full_process, indel_ratio, nfkc, process_and_sort, ratio, token_sort_ratio};

/// What can go wrong: a `regexes_to_ignore` pattern that does not compile, or one that runs out of
/// its backtracking budget on a text; a batch whose two sides differ in length.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("regex {pattern:?} (as {translated:?}): {source}")]
    Regex { pattern: String, translated: String, source: Box<fancy_regex::Error> },
    #[error("{predictions} predictions but {references} references")]
    Lengths { predictions: usize, references: usize },
}
