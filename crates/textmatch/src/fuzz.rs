//! llm-jp-eval's `char_f1` and the fuzzywuzzy 0.18.0 functions under it (see the crate doc for
//! the step-by-step correspondence).

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// llm-jp-eval's `normalize`: `unicodedata.normalize("NFKC", s)` (full-width `Ａ１` -> `A1`,
/// half-width `ｶﾞ` -> `ガ`, `ﬁ` -> `fi`, `½` -> `1⁄2`, U+3000 -> a space, `e` + U+0301 -> `é`).
pub fn nfkc(s: &str) -> String {
    s.nfkc().collect()
}

/// Python's `\w` for a `str` pattern: `str.isalnum()` or `_`, which is general category L* or N*.
pub(crate) fn is_python_word(c: char) -> bool {
    c == '_' || matches!(c.general_category_group(), GeneralCategoryGroup::Letter | GeneralCategoryGroup::Number)
}

/// fuzzywuzzy's `utils.full_process(s, force_ascii)`: with `force_ascii`, the characters
/// U+0080..=U+00FF deleted (`asciidammit` on Python 3: nothing above U+00FF is touched); every
/// character that is not `\w` replaced by a space; `str.lower`; `str.strip`.
pub fn full_process(s: &str, force_ascii: bool) -> String {
    let spaced: String = s
        .chars()
        .filter(|c| !(force_ascii && ('\u{80}'..='\u{ff}').contains(c)))
        .map(|c| if is_python_word(c) { c } else { ' ' })
        .collect();
    // After the replacement only word characters and U+0020 are left, and lowercasing a word
    // character yields no whitespace, so Python's `strip()` removes exactly the spaces here.
    spaced.to_lowercase().trim_matches(' ').to_string()
}

/// fuzzywuzzy's `fuzz._process_and_sort(s, force_ascii=..., full_process=True)`: the processed
/// text's tokens (runs of non-spaces) sorted by code point, joined by single spaces.
pub fn process_and_sort(s: &str, force_ascii: bool) -> String {
    let processed = full_process(s, force_ascii);
    // `str.split()` splits on Python whitespace; only U+0020 can occur after `full_process`.
    let mut tokens: Vec<&str> = processed.split(' ').filter(|t| !t.is_empty()).collect();
    // UTF-8 byte order is code point order, Python's order of `str`.
    tokens.sort_unstable();
    tokens.join(" ")
}

/// python-Levenshtein's `ratio(s1, s2)` (0.27.5: `rapidfuzz.distance.Indel.normalized_similarity`):
/// `1.0 - indel_distance / (len1 + len2)` over code points, `1.0` for two empty strings.
pub fn indel_ratio(s1: &str, s2: &str) -> f64 {
    rapidfuzz::distance::indel::normalized_similarity(s1.chars(), s2.chars())
}

/// fuzzywuzzy's `fuzz.ratio(s1, s2)` with python-Levenshtein installed: 100 if the strings are
/// equal (`check_for_equivalence`, before the empty check: two empty strings score 100), 0 if one
/// is empty (`check_empty_string`), else `intr(100 * ratio)`, Python's round-half-to-even.
pub fn ratio(s1: &str, s2: &str) -> u32 {
    if s1 == s2 {
        return 100;
    }
    if s1.is_empty() || s2.is_empty() {
        return 0;
    }
    (100.0 * indel_ratio(s1, s2)).round_ties_even() as u32
}

/// fuzzywuzzy's `fuzz.token_sort_ratio(s1, s2)` with its defaults (`force_ascii=True`,
/// `full_process=True`): [`ratio`] of the two [`process_and_sort`]ed texts, 0..=100.
pub fn token_sort_ratio(s1: &str, s2: &str) -> u32 {
    ratio(&process_and_sort(s1, true), &process_and_sort(s2, true))
}

/// llm-jp-eval's `char_f1` of one prediction against its gold: `fuzz.token_sort_ratio` of the two
/// NFKC-normalised texts, divided by 100 (a multiple of 0.01 in 0..=1).
pub fn char_f1(pred: &str, gold: &str) -> f64 {
    f64::from(token_sort_ratio(&nfkc(pred), &nfkc(gold))) / 100.0
}

#[cfg(test)]
mod textmatch_tests {
    use super::*;

    #[test]
    fn empty_strings() {
        // check_for_equivalence runs before check_empty_string
        assert_eq!(token_sort_ratio("", ""), 100);
        assert_eq!(char_f1("", ""), 1.0);
        // both sides process to "": equal, 100
        assert_eq!(char_f1("!!!", "? 。"), 1.0);
        assert_eq!(char_f1("", "a"), 0.0);
        assert_eq!(char_f1("abc", "   "), 0.0);
        assert_eq!(ratio("", "x"), 0);
    }

    #[test]
    fn identical_and_order() {
        assert_eq!(char_f1("the cat sat", "the cat sat"), 1.0);
        assert_eq!(token_sort_ratio("sat cat the", "the cat sat"), 100);
        // case and punctuation vanish in full_process
        assert_eq!(token_sort_ratio("The, CAT; sat!", "the cat sat"), 100);
    }

    #[test]
    fn hand_worked_ratios() {
        // "abcd" vs "abce": lcs 3, indel distance 2 of 8, ratio 0.75
        assert_eq!(indel_ratio("abcd", "abce"), 0.75);
        assert_eq!(ratio("abcd", "abce"), 75);
        // len sum 16, distance 2: 87.5 rounds to even 88; distance 6: 62.5 rounds to 62
        assert_eq!(ratio("abcdefgh", "abcdefgz"), 88);
        assert_eq!(ratio("abcdefgh", "abcdexyz"), 62);
        // distance 10 of 16: 37.5 -> 38; distance 14: 12.5 -> 12
        assert_eq!(ratio("abcdefgh", "abcwxyzq"), 38);
        assert_eq!(ratio("abcdefgh", "apqrstuv"), 12);
        assert_eq!(char_f1("abcdefgh", "abcdexyz"), 0.62);
        // "kitten" / "sitting": lcs 4 ("ittn"), distance 13 - 8 = 5, 1 - 5/13 = 61.54 -> 62
        assert_eq!(ratio("kitten", "sitting"), 62);
    }

    #[test]
    fn repeated_tokens_are_kept() {
        assert_eq!(process_and_sort("b a b a", true), "a a b b");
        // "a a b b" vs "a b": lcs 3 ("a b"), distance 7 + 3 - 6 = 4 of 10 -> 60
        assert_eq!(token_sort_ratio("b a b a", "b a"), 60);
    }

    #[test]
    fn force_ascii_deletes_latin1_only() {
        // é (U+00E9) is deleted, not replaced: "café au lait" -> "caf au lait"
        assert_eq!(full_process("Café au lait", true), "caf au lait");
        assert_eq!(full_process("Café au lait", false), "café au lait");
        // × (U+00D7) deleted joins the tokens
        assert_eq!(process_and_sort("3×4", true), "34");
        // Japanese, Greek, œ (U+0153) stay
        assert_eq!(full_process("東京タワー Œuvre ΣΟΦΙΑ", true), "東京タワー œuvre σοφια");
        // Ÿ (U+0178) is kept by force_ascii, then lowercased to ÿ (U+00FF)
        assert_eq!(full_process("Ÿ", true), "ÿ");
        // İ lowercases to i + U+0307, after the \W replacement
        assert_eq!(full_process("İ", true), "i\u{307}");
        assert_eq!(char_f1("naïve", "nave"), 1.0);
    }

    #[test]
    fn punctuation_emoji_and_marks_are_spaces() {
        assert_eq!(full_process("a-b_c.d😀e", true), "a b_c d e");
        // the long vowel mark ー is Lm (a letter), 。 and 、 are punctuation
        assert_eq!(process_and_sort("ラーメン、うどん。", true), "うどん ラーメン");
        // combining acute (Mn) is not \w: a space, unless NFKC composed it first
        assert_eq!(full_process("e\u{301}t", false), "e t");
        assert_eq!(char_f1("e\u{301}t", "ét"), 1.0);
    }

    #[test]
    fn nfkc_is_applied_before_scoring() {
        assert_eq!(nfkc("ＡＢＣ１２３"), "ABC123");
        assert_eq!(nfkc("ｶﾞｷﾞ"), "ガギ");
        assert_eq!(char_f1("ＡＢＣ　１２３", "abc 123"), 1.0);
        // without NFKC the full-width letters are still letters, but different ones
        assert_eq!(token_sort_ratio("ＡＢＣ", "abc"), 0);
        // ½ -> 1⁄2: the fraction slash is a symbol, so two tokens "1 2"
        assert_eq!(process_and_sort(&nfkc("½"), true), "1 2");
    }

    #[test]
    fn final_sigma() {
        assert_eq!(full_process("ΟΔΟΣ ΣΑ", true), "οδο\u{3c2} \u{3c3}α");
    }
}
