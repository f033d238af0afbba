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
                    let words: Vec<&str> = line.split_whitespace().map(|t| t.rsplit_once('/').map_or(t, |(w, _)| w)).collect();
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
        let raw = "\n\n\tThe/at Jury/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ,/, that/cs it/pps took/vbd place/nn ./.\n";
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
    fn plain_paragraphs_drop_blank_and_letterless() {
        assert_eq!(plain_paragraphs("One\r\ntwo\n\n\n\n123\n\nThree "), vec!["One\ntwo", "Three"]);
    }
}
