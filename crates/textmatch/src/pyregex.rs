//! Python `re` patterns (lm-eval's `regexes_to_ignore`) rewritten for `fancy-regex`, so that the
//! places where the two dialects read the same text differently mean what Python means:
//!
//! - `$` outside multiline mode: Python matches at the end *or before a final newline*
//!   (`"12.\n"` loses its `.` under lm-eval's gsm8k pattern `\.$`); Rust only at the end. Written
//!   `(?=\n?\z)`; in multiline mode (`(?m)`, `(?m:...)`) `(?m:$)`, the same in both;
//! - `\Z` (Python's end of text) is Rust's `\z`;
//! - `\w`, `\W`, `\b`, `\B`: Python's word characters are general category L*, N* and `_`; Rust's
//!   `\w` also takes marks and connector punctuation and leaves out `No` (`²`). Written as the
//!   class `[\p{L}\p{N}_]` and lookarounds on it;
//! - `\s`, `\S`: Python's whitespace (`str.isspace`) is Unicode White_Space plus U+001C..=U+001F;
//! - inside a class, `[`, `&`, `~` are literal in Python and set operators in Rust: escaped; `\b`
//!   is a backspace.
//!
//! Left as they are (and so different, or an error from the compiler): Python-only syntax such as
//! `(?a)`, `(?L)`, `\N{...}`, a bare `{` taken as a literal, `(?P=name)`; and the matches after an
//! empty match (Python may match a non-empty text where the empty match was, Rust moves on).

const WORD: &str = r"\p{L}\p{N}_";

/// The fancy-regex pattern that means what Python's `re` means by `pattern` (see the module doc).
pub(crate) fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut multiline = false;
    // the multiline state to restore when each open group closes
    let mut groups: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    out.push('\\');
                    break;
                };
                out.push_str(&escape_outside_class(next));
                i += 2;
            }
            '[' => i = class(&chars, i, &mut out),
            '(' => {
                groups.push(multiline);
                match flag_group(&chars, i) {
                    Some((end, on, off, scoped)) => {
                        if scoped {
                            multiline = (multiline || on) && !off;
                        } else {
                            // `(?m)`: the flags hold for the rest of the enclosing group
                            groups.pop();
                            multiline = (multiline || on) && !off;
                        }
                        out.extend(&chars[i..=end]);
                        i = end + 1;
                    }
                    None => {
                        out.push('(');
                        i += 1;
                    }
                }
            }
            ')' => {
                multiline = groups.pop().unwrap_or(false);
                out.push(')');
                i += 1;
            }
            '$' => {
                out.push_str(if multiline { "(?m:$)" } else { r"(?=\n?\z)" });
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `(?flags)` or `(?flags-flags:` at `start`: (index of its `)` or `:`, multiline turned on,
/// multiline turned off, scoped). `None` for every other group (`(?:`, `(?P<`, `(?=`, ...).
fn flag_group(chars: &[char], start: usize) -> Option<(usize, bool, bool, bool)> {
    if chars.get(start + 1) != Some(&'?') {
        return None;
    }
    let (mut on, mut off, mut negated) = (false, false, false);
    let mut j = start + 2;
    while let Some(&c) = chars.get(j) {
        match c {
            '-' => negated = true,
            c if c.is_ascii_alphabetic() => {
                if c == 'm' {
                    if negated {
                        off = true;
                    } else {
                        on = true;
                    }
                }
            }
            ')' | ':' if j > start + 2 => return Some((j, on, off, c == ':')),
            _ => return None,
        }
        j += 1;
    }
    None
}

fn escape_outside_class(c: char) -> String {
    let not_word = format!("[^{WORD}]");
    let word = format!("[{WORD}]");
    match c {
        'Z' => r"\z".to_string(),
        'w' => word,
        'W' => not_word,
        's' => r"[\s\x1C-\x1F]".to_string(),
        'S' => r"[^\s\x1C-\x1F]".to_string(),
        'b' => format!("(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"),
        'B' => format!("(?:(?<={word})(?={word})|(?<!{word})(?!{word}))"),
        c => format!("\\{c}"),
    }
}

/// Copies the class that opens at `start` (`[`), rewritten, to `out`; returns the index after it.
fn class(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut i = start + 1;
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    // a `]` first in the class is a literal in Python
    if chars.get(i) == Some(&']') {
        out.push_str(r"\]");
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            ']' => {
                out.push(']');
                return i + 1;
            }
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    out.push('\\');
                    return chars.len();
                };
                match next {
                    'w' => out.push_str(WORD),
                    'W' => out.push_str(&format!("[^{WORD}]")),
                    's' => out.push_str(r"\s\x1C-\x1F"),
                    'S' => out.push_str(r"[^\s\x1C-\x1F]"),
                    'b' => out.push_str(r"\x08"),
                    c => {
                        out.push('\\');
                        out.push(c);
                    }
                }
                i += 2;
            }
            c @ ('[' | '&' | '~') => {
                out.push('\\');
                out.push(c);
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    // unterminated: left for the compiler to report
    i
}

#[cfg(test)]
mod textmatch_tests {
    use super::translate;

    fn sub(pattern: &str, text: &str) -> String {
        let re = fancy_regex::Regex::new(&translate(pattern)).unwrap();
        re.try_replacen(text, 0, "").unwrap().into_owned()
    }

    #[test]
    fn dollar_before_a_final_newline() {
        assert_eq!(sub(r"\.$", "12.\n"), "12\n");
        assert_eq!(sub(r"\.$", "12."), "12");
        assert_eq!(sub(r"\.$", "1.2\n3"), "1.2\n3");
        assert_eq!(sub(r"\.$", "1.\n\n"), "1.\n\n");
        assert_eq!(sub(r"(?m)\.$", "1.\n2.\n"), "1\n2\n");
        assert_eq!(sub(r"(?m:a$)|b$", "a\nb\n"), "\n\n");
        assert_eq!(sub(r"\$", "$5"), "5");
        assert_eq!(sub(r"[$]", "$5"), "5");
        assert_eq!(sub(r"\s+$", "ab \n"), "ab");
        assert_eq!(sub(r"x\Z", "x\n"), "x\n");
    }

    #[test]
    fn gsm8k_patterns() {
        let mut s = "The answer is 1,234.\n#### $1,234.".to_string();
        for p in [",", r"\$", "(?s).*#### ", r"\.$"] {
            s = sub(p, &s);
        }
        assert_eq!(s, "1234");
    }

    #[test]
    fn python_word_and_space_classes() {
        // U+0301 is a mark: not a word character in Python
        assert_eq!(sub(r"\w", "e\u{301}²_-"), "\u{301}-");
        assert_eq!(sub(r"[\w]", "e\u{301}²_-"), "\u{301}-");
        assert_eq!(sub(r"\W", "e\u{301}²_-"), "e²_");
        assert_eq!(sub(r"\s", "a\u{1c}b c\u{3000}d"), "abcd");
        assert_eq!(sub(r"\bthe ", "the cat bathe the"), "cat bathe the");
        assert_eq!(sub(r"\b(?:The |the |An |A |The |a |an )", "A cat and the dog"), "cat and dog");
        assert_eq!(sub(r"[]x]", "a]x"), "a");
        assert_eq!(sub(r"[[]", "a[b"), "ab");
        assert_eq!(sub(r"[a&&b]", "a&b"), "");
    }
}
