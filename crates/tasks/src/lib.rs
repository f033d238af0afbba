//! Downstream task files.
//!
//! A task is a JSONL file, one example a line:
//! `{"id": "piqa/17", "choices": [{"context": "...", "continuation": " ..."}, ...], "gold": 0}`.
//! Every choice carries its own context, so one format serves multiple choice (shared context),
//! partial scoring (WinoGrande: the context varies, the continuation is shared), minimal pairs
//! (empty context, two sentences), cloze (one choice: the gold continuation) and free generation
//! (every choice one acceptable answer after the shared prompt). How a task is scored is its
//! [`Kind`] (for generation, with its [`GenerationSpec`]), recorded with its source and licence in
//! `data/tasks/manifest.json` ([`build::ManifestEntry`]).
//! A task's version is the sha256 of its file.

pub mod bigbench;
pub mod build;
pub mod dedup;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub context: String,
    pub continuation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub id: String,
    pub choices: Vec<Choice>,
    pub gold: usize,
}

impl Example {
    /// The identity of the example's text: the sha256 hex of its canonical form, the compact
    /// JSON of the example as the task file holds it (`id`, `choices` with `context` and
    /// `continuation`, `gold`, in that order; before any shots are prepended). Two runs that
    /// scored an example with the same hash scored the same question, options and answer.
    pub fn text_hash(&self) -> String {
        let canonical = serde_json::to_string(self).expect("an example serialises");
        output::provenance::sha256_hex(canonical.as_bytes())
    }
}

/// How a task is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Pick the choice with the highest summed log-likelihood of its continuation (`acc`), or of
    /// that divided by the continuation's length in characters (`acc_norm`), as
    /// lm-evaluation-harness does.
    MultipleChoice,
    /// Two sentences, the first grammatical or original: correct if it is the more likely one
    /// (summed log-likelihood of the whole sentence).
    MinimalPair,
    /// One continuation (a last word): correct if greedy decoding reproduces it exactly; its
    /// log-likelihood is kept too.
    Cloze,
    /// Free generation, as lm-evaluation-harness's `generate_until`: greedy decoding from the
    /// prompt (every choice's context, the same for all) until a stop string or a token budget
    /// ([`GenerationSpec`]); the answer taken from the text is scored against every choice's
    /// continuation (the acceptable answers) by exact match and character F1.
    Generate,
}

/// How a [`Kind::Generate`] task decodes and what of the text it scores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationSpec {
    /// Stop strings (lm-eval's `until`): the text is cut before the first of them.
    pub until: Vec<String>,
    /// The most tokens generated (lm-eval's `max_gen_toks`).
    pub max_new_tokens: usize,
    /// What of the generated text is the answer (lm-eval's filter).
    pub answer: Answer,
    /// lm-eval's `exact_match` arguments, as its task YAMLs set them.
    #[serde(default)]
    pub ignore_case: bool,
    #[serde(default)]
    pub ignore_punctuation: bool,
    /// Python regular expressions deleted from answer and gold before comparing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regexes_to_ignore: Vec<String>,
}

/// The answer a generation task takes from the generated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The text without leading and trailing whitespace.
    Strip,
    /// Its first word: the first run of non-whitespace characters, trailing ASCII punctuation
    /// removed (a last-word cloze asked as free generation: the model goes on after the word).
    FirstWord,
}

impl Answer {
    /// The answer in `text`; golds go through the same rule before they are compared.
    pub fn of(self, text: &str) -> String {
        match self {
            Answer::Strip => text.trim().to_string(),
            Answer::FirstWord => text
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches(|c: char| c.is_ascii_punctuation())
                .to_string(),
        }
    }
}

/// A task's entry in `data/tasks/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    pub name: String,
    pub kind: Kind,
    pub file: String,
    pub sha256: String,
    pub examples: usize,
    /// Expected accuracy of uniform guessing (1 / choices; 0 for cloze exact match).
    pub chance: f64,
    pub source: String,
    pub license: String,
    /// How a [`Kind::Generate`] task decodes (absent for the other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationSpec>,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub info: TaskInfo,
    pub examples: Vec<Example>,
}

/// Parses and validates a task file: no empty file, no malformed line, no duplicate id, a gold
/// index inside the choices, no empty continuation; errors name the file and line.
pub fn parse_examples(path: &Path, text: &str) -> Result<Vec<Example>> {
    let mut out = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let ex: Example =
            serde_json::from_str(line).with_context(|| format!("{}:{}: malformed example", path.display(), i + 1))?;
        if ex.choices.is_empty() || ex.gold >= ex.choices.len() {
            bail!(
                "{}:{}: example `{}` has gold {} but {} choices",
                path.display(),
                i + 1,
                ex.id,
                ex.gold,
                ex.choices.len()
            );
        }
        if ex.choices.iter().any(|c| c.continuation.is_empty()) {
            bail!("{}:{}: example `{}` has an empty continuation", path.display(), i + 1, ex.id);
        }
        if !ids.insert(ex.id.clone()) {
            bail!("{}:{}: duplicate example id `{}`", path.display(), i + 1, ex.id);
        }
        out.push(ex);
    }
    if out.is_empty() {
        bail!("{}: task file has no examples", path.display());
    }
    Ok(out)
}

fn mpath_of(dir: &Path) -> std::path::PathBuf {
    dir.join("manifest.json")
}

/// Loads every task of a manifest, checking each file against its recorded sha256.
pub fn load_all(dir: &Path) -> Result<Vec<Task>> {
    let mpath = mpath_of(dir);
    let text = std::fs::read_to_string(&mpath)
        .with_context(|| format!("{}: cannot read; run `just data`", mpath.display()))?;
    let infos: Vec<TaskInfo> =
        serde_json::from_str(&text).with_context(|| format!("{}: malformed task manifest", mpath.display()))?;
    infos.into_iter().map(|info| load(dir, info)).collect()
}

pub fn load(dir: &Path, info: TaskInfo) -> Result<Task> {
    let path = dir.join(&info.file);
    let bytes = std::fs::read(&path).with_context(|| format!("{}: cannot read task file", path.display()))?;
    let sha = output::provenance::sha256_hex(&bytes);
    if sha != info.sha256 {
        bail!(
            "{}: sha256 {} differs from the manifest's {}; rebuild with `just data`",
            path.display(),
            &sha[..12],
            &info.sha256[..12]
        );
    }
    if (info.kind == Kind::Generate) != info.generation.is_some() {
        bail!(
            "{}: task `{}` is {:?} {} a generation spec; a generation task needs one and only it has one",
            mpath_of(dir).display(),
            info.name,
            info.kind,
            if info.generation.is_some() { "with" } else { "without" }
        );
    }
    let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8", path.display()))?;
    let examples = parse_examples(&path, &text)?;
    if info.kind == Kind::Generate {
        if let Some(e) = examples.iter().find(|e| e.choices.iter().any(|c| c.context != e.choices[0].context)) {
            bail!("{}: generation example `{}` has answers after different prompts", path.display(), e.id);
        }
    }
    if examples.len() != info.examples {
        bail!("{}: {} examples, the manifest says {}", path.display(), examples.len(), info.examples);
    }
    Ok(Task { info, examples })
}

/// A deterministic subset of at most `n` examples: those with the smallest sha256 of
/// (seed, id), so the subset of a task does not depend on file order, and growing `n` only adds.
pub fn subsample(examples: &[Example], n: usize, seed: u64) -> Vec<Example> {
    let mut keyed: Vec<([u8; 32], &Example)> =
        examples.iter().map(|e| (Sha256::digest(format!("{seed}/{}", e.id).as_bytes()).into(), e)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().take(n).map(|(_, e)| e.clone()).collect()
}

/// Prepends `k` solved examples of the same task (drawn deterministically, never the example
/// itself) to every choice's context: "context + gold continuation" blocks separated by blank
/// lines, as k-shot prompts are built in lm-evaluation-harness.
pub fn with_shots(pool: &[Example], examples: &[Example], k: usize, seed: u64) -> Vec<Example> {
    if k == 0 {
        return examples.to_vec();
    }
    examples
        .iter()
        .map(|ex| {
            let shots: Vec<Example> =
                subsample(pool, k + 1, seed ^ hash64(&ex.id)).into_iter().filter(|s| s.id != ex.id).take(k).collect();
            let prefix: String = shots
                .iter()
                .map(|s| format!("{}{}\n\n", s.choices[s.gold].context, s.choices[s.gold].continuation))
                .collect();
            let mut e = ex.clone();
            for c in &mut e.choices {
                c.context = format!("{prefix}{}", c.context);
            }
            e
        })
        .collect()
}

fn hash64(s: &str) -> u64 {
    let h = Sha256::digest(s.as_bytes());
    u64::from_le_bytes(h[..8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(id: &str, gold: usize) -> Example {
        Example {
            id: id.into(),
            choices: vec![
                Choice { context: format!("Q{id}"), continuation: " a".into() },
                Choice { context: format!("Q{id}"), continuation: " b".into() },
            ],
            gold,
        }
    }

    #[test]
    fn empty_malformed_and_duplicate_task_files_are_refused_with_file_and_line() {
        let p = Path::new("data/tasks/x.jsonl");
        assert!(format!("{:#}", parse_examples(p, "\n\n").unwrap_err()).contains("x.jsonl: task file has no examples"));
        let e = format!("{:#}", parse_examples(p, "{\"id\": 1").unwrap_err());
        assert!(e.contains("x.jsonl:1: malformed example"), "{e}");
        let line = serde_json::to_string(&ex("a", 0)).unwrap();
        let e = format!("{:#}", parse_examples(p, &format!("{line}\n{line}\n")).unwrap_err());
        assert!(e.contains("x.jsonl:2: duplicate example id `a`"), "{e}");
        let bad = serde_json::to_string(&ex("b", 2)).unwrap();
        assert!(format!("{:#}", parse_examples(p, &bad).unwrap_err()).contains("gold 2 but 2 choices"));
    }

    /// The same example hashes the same (and as the sha256 of its JSON line); another context,
    /// continuation, gold or id changes the hash.
    #[test]
    fn text_hash_is_the_identity_of_the_text() {
        let a = ex("a", 0);
        assert_eq!(a.text_hash(), ex("a", 0).text_hash());
        assert_eq!(a.text_hash(), output::provenance::sha256_hex(serde_json::to_string(&a).unwrap().as_bytes()));
        assert_eq!(a.text_hash().len(), 64);
        let mut changed = Vec::new();
        for choice in 0..2 {
            let mut b = a.clone();
            b.choices[choice].context.push('?');
            changed.push(b);
            let mut b = a.clone();
            b.choices[choice].continuation = " c".into();
            changed.push(b);
        }
        changed.push(ex("a", 1));
        changed.push(ex("b", 0));
        let mut swapped = a.clone();
        swapped.choices.swap(0, 1);
        changed.push(swapped);
        for b in &changed {
            assert_ne!(a.text_hash(), b.text_hash(), "{b:?}");
        }
    }

    /// The answer rules: the whole text trimmed, or its first word without trailing ASCII
    /// punctuation (a word that is all punctuation leaves nothing).
    #[test]
    fn answers_are_taken_from_the_text_by_the_task_rule() {
        assert_eq!(Answer::Strip.of("  Paris, France \n"), "Paris, France");
        assert_eq!(Answer::FirstWord.of(" whale. And then"), "whale");
        assert_eq!(Answer::FirstWord.of("\n  Ahab's ship"), "Ahab's");
        assert_eq!(Answer::FirstWord.of(" ...?"), "");
        assert_eq!(Answer::FirstWord.of(""), "");
        assert_eq!(Answer::Strip.of(" \t "), "");
    }

    /// A generation task's manifest entry carries its spec; a generation task without one, or
    /// another kind with one, is refused when loaded, as is a generation example whose answers
    /// follow different prompts.
    #[test]
    fn generation_specs_belong_to_generation_tasks_only() {
        let dir = tempfile::tempdir().unwrap();
        let ex = |ctx2: &str| Example {
            id: "g/0".into(),
            choices: vec![
                Choice { context: "Q: sea?\nA:".into(), continuation: " water".into() },
                Choice { context: ctx2.into(), continuation: " brine".into() },
            ],
            gold: 0,
        };
        let spec = GenerationSpec {
            until: vec!["\n".into()],
            max_new_tokens: 8,
            answer: Answer::Strip,
            ignore_case: true,
            ignore_punctuation: false,
            regexes_to_ignore: vec![],
        };
        let write = |e: &Example, kind: Kind, generation: Option<GenerationSpec>| {
            let line = serde_json::to_string(e).unwrap() + "\n";
            std::fs::write(dir.path().join("g.jsonl"), &line).unwrap();
            let info = TaskInfo {
                name: "g".into(),
                kind,
                file: "g.jsonl".into(),
                sha256: output::provenance::sha256_hex(line.as_bytes()),
                examples: 1,
                chance: 0.0,
                source: String::new(),
                license: String::new(),
                generation,
            };
            std::fs::write(dir.path().join("manifest.json"), serde_json::to_string(&[&info]).unwrap()).unwrap();
            load_all(dir.path())
        };
        let ok = write(&ex("Q: sea?\nA:"), Kind::Generate, Some(spec.clone())).unwrap();
        assert_eq!(ok[0].info.generation.as_ref(), Some(&spec));
        let e = format!("{:#}", write(&ex("Q: sea?\nA:"), Kind::Generate, None).unwrap_err());
        assert!(e.contains("task `g` is Generate without a generation spec"), "{e}");
        let e = format!("{:#}", write(&ex("Q: sea?\nA:"), Kind::Cloze, Some(spec.clone())).unwrap_err());
        assert!(e.contains("task `g` is Cloze with a generation spec"), "{e}");
        let e = format!("{:#}", write(&ex("Q: lake?\nA:"), Kind::Generate, Some(spec)).unwrap_err());
        assert!(e.contains("g.jsonl: generation example `g/0` has answers after different prompts"), "{e}");
    }

    #[test]
    fn subsample_is_stable_and_nested() {
        let all: Vec<Example> = (0..100).map(|i| ex(&i.to_string(), 0)).collect();
        let mut rev = all.clone();
        rev.reverse();
        let a = subsample(&all, 10, 1);
        assert_eq!(a, subsample(&rev, 10, 1));
        assert_eq!(&subsample(&all, 20, 1)[..10], &a[..]);
        assert_ne!(a, subsample(&all, 10, 2));
    }

    #[test]
    fn shots_are_other_solved_examples() {
        let all: Vec<Example> = (0..20).map(|i| ex(&i.to_string(), i % 2)).collect();
        let shot = with_shots(&all, &all[..3], 2, 0);
        for (orig, s) in all.iter().zip(&shot) {
            let ctx = &s.choices[0].context;
            let prefix = ctx.strip_suffix(&orig.choices[0].context).unwrap();
            let blocks: Vec<&str> = prefix.split_terminator("\n\n").collect();
            assert_eq!(blocks.len(), 2);
            for b in blocks {
                let (q, answer) = b.split_once(' ').unwrap();
                assert_ne!(q, orig.choices[0].context, "an example is its own shot");
                let shot = &all[q[1..].parse::<usize>().unwrap()];
                assert_eq!(format!(" {answer}"), shot.choices[shot.gold].continuation, "shots carry their gold answer");
            }
        }
        assert_eq!(with_shots(&all, &all[..3], 0, 0), all[..3].to_vec());
    }
}
