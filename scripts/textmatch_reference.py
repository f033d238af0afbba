#!/usr/bin/env python3
"""Reference scores of generated text for crates/textmatch, from the pinned Python originals.

    .venv/bin/python scripts/textmatch_reference.py            # (re)write the fixtures
    .venv/bin/python scripts/textmatch_reference.py --check    # exit 1 if they would change

Needs, in the venv: fuzzywuzzy==0.18.0 python-Levenshtein==0.27.5 Levenshtein==0.27.5
rapidfuzz==3.14.6 (checked at start) and numpy (lm-eval's exact_match runs on numpy arrays).

It makes text pairs deterministically (seeded; hand-picked hard cases, then generated ones:
empty strings, Japanese with full- and half-width forms, accented Latin, Greek, emoji, punctuation,
repeated and reordered tokens, rounding boundaries of fuzzywuzzy's ratio) and scores each with

- llm-jp-eval's char_f1: `normalize` (NFKC) on both texts, then fuzzywuzzy's
  `fuzz.token_sort_ratio` (python-Levenshtein's `ratio` under it) divided by 100;
- lm-evaluation-harness's `exact_match_hf_evaluate` under the option sets of `EM_VARIANTS`;

and writes crates/textmatch/tests/fixtures/char_f1_reference.jsonl (one line per pair: pred,
gold, the kind of pair, the processed and sorted texts, python-Levenshtein's ratio of them,
token_sort_ratio, char_f1, and exact_match per option set) and exact_match_multi_reference.jsonl
(a prediction against a list of golds: lm-eval's multiple-target exact_match, the best char_f1).
crates/textmatch/tests/parity.rs checks every line. The same packages give the same bytes.
"""

import argparse
import importlib.metadata
import importlib.util
import inspect
import json
import random
import re
import string
import sys
import unicodedata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates" / "textmatch" / "tests" / "fixtures"
PAIRS_FILE = FIXTURES / "char_f1_reference.jsonl"
MULTI_FILE = FIXTURES / "exact_match_multi_reference.jsonl"
SEED = 20251027
GENERATED = 1100
MULTI = 80

PINS = {
    "fuzzywuzzy": "0.18.0",
    "python-Levenshtein": "0.27.5",
    "Levenshtein": "0.27.5",
    "rapidfuzz": "3.14.6",
}


def check_pins():
    wrong = []
    for name, want in PINS.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = None
        if have != want:
            wrong.append(f"{name}: want {want}, have {have}")
    if wrong:
        pins = " ".join(f"{n}=={v}" for n, v in PINS.items())
        sys.exit("textmatch_reference: the reference packages are not the pinned ones:\n  "
                 + "\n  ".join(wrong) + f"\ninstall them: .venv/bin/pip install {pins}")


check_pins()

from fuzzywuzzy import fuzz  # noqa: E402
import Levenshtein  # noqa: E402

# fuzz.py falls back to difflib's SequenceMatcher (other numbers) without python-Levenshtein
assert fuzz.SequenceMatcher.__module__ == "fuzzywuzzy.StringMatcher", fuzz.SequenceMatcher


# --- llm-jp-eval, src/llm_jp_eval/utils.py (v1.x), the two functions verbatim. The repository
# itself could not be read where this script was written: these were read in verbatim copies of
# that utils.py in public forks (the same two lines in each). Its evaluator applies `normalize`
# to the prediction and to the gold (`y_true = normalize(sample["output"])`) before the metric.
def normalize(input_str: str) -> str:
    return unicodedata.normalize("NFKC", input_str)


def char_f1(y_pred: str, y_true: str) -> float:
    return fuzz.token_sort_ratio(y_pred, y_true) / 100.0


# --- lm-evaluation-harness 0.4.13, lm_eval/api/metrics.py, verbatim (checked against the
# installed lm_eval when there is one, see `check_lm_eval_copy`).
def exact_match_hf_evaluate(
    predictions,
    references,
    regexes_to_ignore=None,
    ignore_case=False,
    ignore_punctuation=False,
    ignore_numbers=False,
):
    if regexes_to_ignore is not None:
        for s in regexes_to_ignore:
            predictions = np.array([re.sub(s, "", x) for x in predictions])
            references = np.array([re.sub(s, "", x) for x in references])
    else:
        predictions = np.asarray(predictions)
        references = np.asarray(references)

    if ignore_case:
        predictions = np.char.lower(predictions)
        references = np.char.lower(references)

    if ignore_punctuation:
        repl_table = string.punctuation.maketrans("", "", string.punctuation)
        predictions = np.char.translate(predictions, table=repl_table)
        references = np.char.translate(references, table=repl_table)

    if ignore_numbers:
        repl_table = string.digits.maketrans("", "", string.digits)
        predictions = np.char.translate(predictions, table=repl_table)
        references = np.char.translate(references, table=repl_table)

    score_list = predictions == references

    return {"exact_match": np.mean(score_list)}


def check_lm_eval_copy():
    """The copy above must be the installed lm_eval's function, character for character."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        print("textmatch_reference: lm_eval not installed; using the copy of 0.4.13's "
              "exact_match_hf_evaluate", file=sys.stderr)
        return
    source = (Path(list(spec.submodule_search_locations)[0]) / "api" / "metrics.py").read_text()
    ours = inspect.getsource(exact_match_hf_evaluate)
    if ours not in source:
        sys.exit("textmatch_reference: lm_eval's exact_match_hf_evaluate differs from the copy here")


def lm_eval_multi_target_exact_match(result, gold, kwargs):
    """lm_eval/api/task.py (0.4.13) ConfigurableTask.process_results, generate_until, a list
    target, metric == "exact_match"."""
    if not isinstance(gold, list):
        gold = [gold]
    result = [result for _ in range(len(gold))]
    scores = exact_match_hf_evaluate(references=gold, predictions=result, **kwargs)["exact_match"]
    return 1.0 if scores > 0.0 else 0.0


# lm-eval's own option sets (gsm8k: `regexes_to_ignore` [",", "\\$", "(?s).*#### ", "\\.$"];
# tasks that strip "^\\s+", "\\s+$"; an article-dropping one) and the flags alone and together.
# crates/textmatch/tests/parity.rs holds the same table.
GSM8K = [",", "\\$", "(?s).*#### ", "\\.$"]
EM_VARIANTS = {
    "plain": {},
    "case": {"ignore_case": True},
    "punct": {"ignore_punctuation": True},
    "case_punct": {"ignore_case": True, "ignore_punctuation": True},
    "numbers": {"ignore_numbers": True},
    "gsm8k": {"regexes_to_ignore": GSM8K},
    "strip_ws_case": {"regexes_to_ignore": ["^\\s+", "\\s+$"], "ignore_case": True},
    "articles": {"regexes_to_ignore": ["\\b(?:The |the |An |A |The |a |an )"], "ignore_case": True,
                 "ignore_punctuation": True},
    "all": {"regexes_to_ignore": GSM8K, "ignore_case": True, "ignore_punctuation": True,
            "ignore_numbers": True},
}

# --- the pairs

HAND = [
    # empty and nothing-but-separators: fuzz.ratio's equality check comes before its empty check
    ("", ""), ("", "a"), ("a", ""), ("!!!", ""), ("!!!", "? 。"), ("   ", "\n\t"), ("😀", "🎉"),
    ("", "東京"), ("\u3000", ""), ("\x00", ""), ("a\x00", "a"), ("\x00a", "a"),
    # identical, reordered, repeated
    ("the cat sat", "the cat sat"), ("sat cat the", "the cat sat"), ("The, CAT; sat!", "the cat sat"),
    ("b a b a", "b a"), ("a a a", "a"), ("cat cat", "cat"), ("東京 東京 大阪", "大阪 東京"),
    # fuzz ratio at .5: len sum 16 and distance 2, 6, 10, 14 -> 87.5, 62.5, 37.5, 12.5 (to even)
    ("abcdefgh", "abcdefgz"), ("abcdefgh", "abcdexyz"), ("abcdefgh", "abcwxyzq"), ("abcdefgh", "apqrstuv"),
    ("abcd", "abce"), ("kitten", "sitting"), ("lewenstein", "levenshtein"),
    ("abcdefghijklmnopqrstuvwxyzabcdefghijklmn", "abcdefghijklmnopqrstuvwxyzabcdefghijkxyz"),
    ("a" * 40, "a" * 39 + "b"), ("xy" * 20, "yx" * 20),
    # force_ascii deletes U+0080..U+00FF only
    ("Café au lait", "Caf au lait"), ("naïve", "nave"), ("3×4", "34"), ("Straße", "Strae"),
    ("Œuvre", "œuvre"), ("Ÿ", "ÿ"), ("øre", "re"), ("Ångström", "ngstrm"), ("ñandú", "nand"),
    ("São Paulo", "So Paulo"), ("Zürich", "Zurich"), ("crème brûlée", "crme brle"), ("¿Qué?", "Qu"),
    ("price: 5€", "price 5"), ("5°C", "5C"), ("©2024", "2024"), ("a·b", "ab"), ("«quote»", "quote"),
    # case: İ, final sigma, titlecase digraphs, ligatures
    ("İstanbul", "istanbul"), ("İ", "i"), ("İ", "i\u0307"), ("ΟΔΟΣ", "οδος"), ("ΟΔΟΣ", "οδοσ"),
    ("ΣΑΣ ΣΑ", "σας σα"), ("ǅemal", "ǆemal"), ("ﬁne", "fine"), ("ẞ", "ß"), ("K", "k"), ("Å", "å"),
    # NFKC: full/half width, compatibility forms, composition
    ("ＡＢＣ１２３", "abc123"), ("ＡＢＣ　１２３", "abc 123"), ("ｶﾀｶﾅ", "カタカナ"), ("ｶﾞｷﾞ", "ガギ"),
    ("㍻", "平成"), ("①②", "12"), ("½", "1 2"), ("x²", "x2"), ("Ⅻ", "XII"), ("µ", "μ"), ("ª", "a"),
    ("e\u0301t", "ét"), ("e\u0301t", "e t"), ("\u00a0a\u00a0", "a"), ("a\u200bb", "a b"), ("a\u2003b", "a b"),
    # Japanese
    ("東京タワー", "東京 タワー"), ("ラーメン、うどん。", "うどん ラーメン"), ("「東京」です", "東京 です"),
    ("日本の首都は東京です。", "東京"), ("東京", "京都"), ("ひらがな・カタカナ", "カタカナ ひらがな"),
    ("回答: 東京", "東京"), ("答え：大阪", "大阪"), ("２０２４年", "2024年"), ("令和６年", "令和6年"),
    # emoji and symbols are separators
    ("👍🏽 good", "good"), ("👨‍👩‍👧family", "family"), ("🇯🇵 Japan", "japan"), ("❤️love❤️", "love"),
    ("a-b_c.d😀e", "a b_c d e"), ("foo_bar", "foo bar"), ("e-mail", "e mail"), ("don't", "don t"),
    ("U.S.A.", "usa"), ("1,234.5", "1 234 5"), ("C++ / C#", "c c"),
    # combining marks and other scripts
    ("नमस्ते", "नमसत"), ("Москва", "москва"), ("Ελληνικά", "ελληνικα"), ("\x1cA\x1fB", "a b"),
    # exact_match's own cases: gsm8k answers, whitespace, articles, punctuation, digits
    ("The answer is 1,234.\n#### 1,234.", "1234"), ("Step.\n#### $1,234.\n", "1234"),
    ("#### 72", "72"), ("72.", "72"), ("72.\n", "72"), ("72.\n\n", "72"), ("$72", "72"),
    ("  Paris  ", "paris"), ("\tParis\n", "PARIS"), ("The Eiffel Tower", "eiffel tower"),
    ("a cat", "cat"), ("An apple, the pear", "apple pear"), ("PARIS.", "paris"), ("paris!", "Paris?"),
    ("東京。", "東京"), ("東京!", "東京"), ("a_b", "ab"), ("a1b2", "ab"), ("a１", "a"), ("42", "42.0"),
]

ASCII_WORDS = ["the", "cat", "sat", "on", "mat", "Paris", "London", "answer", "is", "42", "1,234",
               "3.14", "New", "York", "a", "an", "The", "foo_bar", "x", "don't", "e-mail", "U.S.A.",
               "model", "token", "step", "loss", "A", "B", "C", "D", "yes", "no", "true", "False"]
JAPANESE = ["東京", "大阪", "京都", "日本", "ラーメン", "すし", "カタカナ", "ひらがな", "漢字", "ｶﾀｶﾅ",
            "ｶﾞ", "ガ", "Ａ１", "１２３", "令和", "㍻", "①", "ー", "です", "ます", "首都", "回答:",
            "答え：", "は", "の", "が", "を"]
LATIN = ["café", "naïve", "Straße", "Ångström", "Œuvre", "øre", "ñandú", "São", "Zürich", "crème",
         "brûlée", "Ÿ", "İstanbul", "ǅ", "ﬁne", "e\u0301", "ΟΔΟΣ", "Σοφία", "ς", "Москва", "नमस्ते"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "✅", "🎉"]
PUNCT = list(",.!?;:-—…()[]\"'$%&#@/\\*+=<>~`^|{}_") + ["×", "÷", "°", "±", "§", "©", "®", "™",
                                                          "€", "£", "¥", "½", "²", "µ", "、", "。",
                                                          "「", "」", "・", "！", "？"]
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\n\n", "\u3000", "\u00a0", "\u2003", "\u200b", "\r\n", ""]
NUMBERS = ["0", "7", "42", "1,000", "3.5", "２０２４", "Ⅻ", "⅓", "-5", "$12", "1e3"]
POOLS = [(ASCII_WORDS, 5), (JAPANESE, 3), (LATIN, 2), (EMOJI, 1), (PUNCT, 1), (NUMBERS, 2)]
# single code points from old blocks (all assigned before Unicode 14, so the Rust tables agree)
RANGES = [(0x41, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x391, 0x3C9), (0x410, 0x44F), (0x300, 0x36F),
          (0x905, 0x94D), (0x2010, 0x2027), (0x3041, 0x3096), (0x30A1, 0x30FC), (0x4E00, 0x4FFF),
          (0xFF01, 0xFF5E), (0xFF66, 0xFF9F), (0x1F600, 0x1F64F)]


def random_char(rng):
    while True:
        lo, hi = rng.choice(RANGES)
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs"):
            return c


def random_token(rng):
    r = rng.random()
    if r < 0.12:
        return "".join(random_char(rng) for _ in range(rng.randint(1, 4)))
    pools, weights = zip(*POOLS)
    return rng.choice(rng.choices(pools, weights)[0])


def random_text(rng, n_min=0, n_max=10):
    n = rng.randint(n_min, n_max)
    out = []
    for i in range(n):
        if i:
            out.append(rng.choice(SPACES))
        out.append(random_token(rng))
    return "".join(out)


def to_fullwidth(s, rng):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and rng.random() < 0.5 else c for c in s)


def mutate(gold, rng):
    """A prediction made from the gold by one kind of change; (kind, prediction)."""
    tokens = gold.split(" ")
    kind = rng.choice(["same", "shuffle", "drop", "repeat", "edit", "edit", "case", "punct", "width",
                       "prefix", "gsm8k", "empty", "unrelated", "unrelated", "nul", "spaces"])
    if kind == "same":
        return kind, gold
    if kind == "shuffle":
        rng.shuffle(tokens)
        return kind, " ".join(tokens)
    if kind == "drop":
        if tokens:
            del tokens[rng.randrange(len(tokens))]
        return kind, " ".join(tokens)
    if kind == "repeat":
        if tokens:
            i = rng.randrange(len(tokens))
            tokens.insert(i, tokens[i])
        return kind, " ".join(tokens)
    if kind == "edit":
        s = list(gold)
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(["ins", "del", "sub"])
            i = rng.randint(0, len(s))
            if op == "ins" or not s:
                s.insert(i, random_char(rng))
            elif op == "del":
                del s[min(i, len(s) - 1)]
            else:
                s[min(i, len(s) - 1)] = random_char(rng)
        return kind, "".join(s)
    if kind == "case":
        return kind, rng.choice([gold.upper(), gold.lower(), gold.title(), gold.swapcase()])
    if kind == "punct":
        return kind, rng.choice(["", " ", "\n"]).join([gold, rng.choice(PUNCT)]) + rng.choice(["", "."])
    if kind == "width":
        return kind, to_fullwidth(gold, rng)
    if kind == "prefix":
        return kind, rng.choice(["Answer: ", "The answer is ", "回答: ", "答え：", "  "]) + gold
    if kind == "gsm8k":
        return kind, f"{random_text(rng, 1, 6)}\n#### {gold}" + rng.choice(["", ".", ".\n", "\n"])
    if kind == "empty":
        return kind, rng.choice(["", " ", "\n", "。", "...", "😀"])
    if kind == "nul":
        return kind, gold + "\x00" * rng.randint(1, 2)
    if kind == "spaces":
        return kind, rng.choice(SPACES) + gold.replace(" ", rng.choice(SPACES)) + rng.choice(SPACES)
    return kind, random_text(rng)


def pairs():
    for pred, gold in HAND:
        yield "hand", pred, gold
    rng = random.Random(SEED)
    for _ in range(GENERATED):
        gold = random_text(rng, 0, 8)
        kind, pred = mutate(gold, rng)
        if rng.random() < 0.5:
            pred, gold = gold, pred
        yield kind, pred, gold


def score_pair(kind, pred, gold):
    sorted_pred = fuzz._process_and_sort(normalize(pred), force_ascii=True)
    sorted_gold = fuzz._process_and_sort(normalize(gold), force_ascii=True)
    tsr = fuzz.token_sort_ratio(normalize(pred), normalize(gold))
    em = {name: float(exact_match_hf_evaluate([pred], [gold], **kw)["exact_match"])
          for name, kw in EM_VARIANTS.items()}
    return {
        "kind": kind,
        "pred": pred,
        "gold": gold,
        "sorted_pred": sorted_pred,
        "sorted_gold": sorted_gold,
        "indel_ratio": Levenshtein.ratio(sorted_pred, sorted_gold),
        "token_sort_ratio": tsr,
        "char_f1": char_f1(normalize(pred), normalize(gold)),
        "exact_match": em,
    }


def multi_cases():
    rng = random.Random(SEED + 1)
    hand = [
        ("İ", ["İ"]), ("i\u0307", ["İ"]), ("i\u0307", ["İ", "longer"]), ("I", ["i", "longer gold"]),
        ("Paris", ["paris", "Paris, France"]), ("72", ["72", "seventy-two"]),
        ("1,234.", ["1234", "1235"]), ("東京", ["東京都", "とうきょう"]), ("", [""]), ("a\x00", ["a", "b"]),
    ]
    for pred, golds in hand:
        yield "hand", pred, golds
    for _ in range(MULTI - len(hand)):
        golds = [random_text(rng, 0, 4) for _ in range(rng.randint(1, 4))]
        kind, pred = mutate(rng.choice(golds), rng)
        yield kind, pred, golds


def score_multi(kind, pred, golds):
    em = {name: lm_eval_multi_target_exact_match(pred, list(golds), kw) for name, kw in EM_VARIANTS.items()}
    best = max((char_f1(normalize(pred), normalize(g)) for g in golds), default=0.0)
    return {"kind": kind, "pred": pred, "golds": golds, "exact_match": em, "char_f1_best": best}


def render(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the fixtures would change")
    args = ap.parse_args()
    check_lm_eval_copy()
    rows = [score_pair(*p) for p in pairs()]
    multi = [score_multi(*c) for c in multi_cases()]
    outputs = {PAIRS_FILE: render(rows), MULTI_FILE: render(multi)}
    print(f"textmatch_reference: {len(rows)} pairs, {len(multi)} multi-target cases "
          f"(Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}, numpy {np.__version__})")
    if args.check:
        stale = []
        for path, data in outputs.items():
            old = path.read_bytes() if path.exists() else b""
            if old != data:
                old_lines, new_lines = old.split(b"\n"), data.split(b"\n")
                first = next((i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b),
                             min(len(old_lines), len(new_lines)))
                stale.append(f"{path.relative_to(ROOT)} differs from line {first + 1}")
        if stale:
            print("textmatch_reference: the fixtures are not what the reference gives:\n  "
                  + "\n  ".join(stale), file=sys.stderr)
            sys.exit(1)
        print("textmatch_reference: fixtures byte-identical")
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for path, data in outputs.items():
        path.write_bytes(data)
        print(f"textmatch_reference: wrote {path.relative_to(ROOT)} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
