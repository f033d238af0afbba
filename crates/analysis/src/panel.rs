//! One task's per-example records as checkpoint x example matrices (ndarray), one per metric.
//!
//! Rows are checkpoints in step order, columns examples in id order; every checkpoint must score
//! the same examples (the eval set is fixed and shared, which is what makes consecutive scores
//! paired). A metric that is undefined on some example (`gold_prob` of a cloze item, bits per
//! byte without byte counts) has no matrix. Where the rows carry the identity of the example's
//! text (`item_hash`), one example must have the same text at every checkpoint that says.
//! Outputs are interned per panel ([`Text`]): a cell holds a shared pointer, not its own string,
//! so a panel of 200 checkpoints x 5,000 examples keeps its outputs in 16 MB per form.

use anyhow::{bail, Result};
use ndarray::{Array2, ArrayView2, Axis};
use records::ExampleRecord;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::continuous::Metric;

/// One output text, shared by every cell that holds the same text.
pub type Text = Arc<str>;

/// Interns texts: equal texts share one allocation.
#[derive(Default)]
struct Interner(HashMap<String, Text>);

impl Interner {
    fn get(&mut self, s: &str) -> Text {
        if let Some(t) = self.0.get(s) {
            return t.clone();
        }
        let t: Text = Arc::from(s);
        self.0.insert(s.to_string(), t.clone());
        t
    }
}

pub struct Panel {
    pub task: String,
    pub steps: Vec<u64>,
    pub ids: Vec<String>,
    /// Identity of each example's text (`ExampleRecord::item_hash`): the first non-empty hash
    /// over its checkpoints, empty where no checkpoint says (tables before version 3).
    pub hashes: Vec<String>,
    pub gold: Vec<u32>,
    /// Accuracy of uniform guessing: the mean over examples of 1 / options (0 for cloze, which
    /// is scored by exact match).
    pub chance: f64,
    /// The model's output per example and checkpoint (`[example][t]`), under `acc` and `acc_norm`
    /// (of a generation task: the generated text, under both).
    pub outputs: Vec<Vec<Text>>,
    pub outputs_norm: Vec<Vec<Text>>,
    /// A generation task (every row has gold texts and no options): scored by `acc` (exact match)
    /// and `char_f1`, its outputs compared by char F1 in the instability score.
    pub generation: bool,
    values: BTreeMap<Metric, Array2<f64>>,
}

impl Panel {
    /// The panel of one task's rows (any order).
    pub fn build(task: &str, rows: &[&ExampleRecord]) -> Result<Panel> {
        let mut steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
        steps.sort_unstable();
        steps.dedup();
        let col: BTreeMap<u64, usize> = steps.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        let mut by_id: BTreeMap<&str, Vec<Option<&ExampleRecord>>> = BTreeMap::new();
        for r in rows {
            let slot = &mut by_id.entry(&r.example_id).or_insert_with(|| vec![None; steps.len()])[col[&r.step]];
            if slot.is_some() {
                bail!("task {task}: example {} appears twice at step {}", r.example_id, r.step);
            }
            *slot = Some(r);
        }
        let mut grid: Vec<Vec<&ExampleRecord>> = Vec::with_capacity(by_id.len());
        let mut ids = Vec::with_capacity(by_id.len());
        let mut hashes = Vec::with_capacity(by_id.len());
        for (id, cells) in by_id {
            let Some(cells) = cells.into_iter().collect::<Option<Vec<_>>>() else {
                bail!("task {task}: example {id} is missing at some checkpoints; every checkpoint must score the same examples");
            };
            let mut known: Option<&ExampleRecord> = None;
            for r in cells.iter().filter(|r| !r.item_hash.is_empty()) {
                match known {
                    Some(f) if f.item_hash != r.item_hash => {
                        bail!("task {task}: example {id} has other text at step {} than at step {}", r.step, f.step)
                    }
                    Some(_) => {}
                    None => known = Some(r),
                }
            }
            hashes.push(known.map_or_else(String::new, |r| r.item_hash.clone()));
            ids.push(id.to_string());
            grid.push(cells);
        }
        let generation = !grid.is_empty() && grid.iter().flatten().all(|r| r.is_generation());
        if !generation && grid.iter().flatten().any(|r| r.is_generation()) {
            bail!("task {task}: generation rows (gold texts) mixed with multiple-choice rows");
        }
        let (t_len, n) = (steps.len(), ids.len());
        let mut values = BTreeMap::new();
        'metric: for m in Metric::ALL {
            let mut a = Array2::<f64>::zeros((t_len, n));
            for (e, cells) in grid.iter().enumerate() {
                for (t, r) in cells.iter().enumerate() {
                    match m.value(r) {
                        Some(v) if v.is_finite() => a[[t, e]] = v,
                        _ => continue 'metric,
                    }
                }
            }
            values.insert(m, a);
        }
        let options: Vec<usize> = grid.iter().map(|c| c[0].logliks.len()).collect();
        let chance = if n == 0 {
            0.0
        } else {
            options.iter().map(|&o| if o > 1 { 1.0 / o as f64 } else { 0.0 }).sum::<f64>() / n as f64
        };
        let mut texts = Interner::default();
        Ok(Panel {
            task: task.to_string(),
            steps,
            gold: grid.iter().map(|c| c[0].gold).collect(),
            chance,
            outputs: grid.iter().map(|c| c.iter().map(|r| texts.get(&r.output)).collect()).collect(),
            outputs_norm: grid
                .iter()
                .map(|c| {
                    c.iter()
                        .map(
                            |r| {
                                if generation {
                                    texts.get(&r.output)
                                } else {
                                    texts.get(&r.predicted_norm.to_string())
                                }
                            },
                        )
                        .collect()
                })
                .collect(),
            generation,
            ids,
            hashes,
            values,
        })
    }

    /// Panels of every task of a table, by task name.
    pub fn all(rows: &[ExampleRecord]) -> Result<BTreeMap<String, Panel>> {
        let mut by_task: BTreeMap<&str, Vec<&ExampleRecord>> = BTreeMap::new();
        for r in rows {
            by_task.entry(&r.task).or_default().push(r);
        }
        by_task.into_iter().map(|(t, rs)| Ok((t.to_string(), Panel::build(t, &rs)?))).collect()
    }

    pub fn examples(&self) -> usize {
        self.ids.len()
    }

    /// The metrics defined on every example of the task.
    pub fn metrics(&self) -> Vec<Metric> {
        self.values.keys().copied().collect()
    }

    /// checkpoints x examples values of a metric, if defined.
    pub fn values(&self, m: Metric) -> Option<ArrayView2<'_, f64>> {
        self.values.get(&m).map(|a| a.view())
    }

    /// Task score per checkpoint: the mean over examples.
    pub fn scores(&self, m: Metric) -> Option<Vec<f64>> {
        self.values(m).map(|v| v.mean_axis(Axis(1)).map(|s| s.to_vec()).unwrap_or_default())
    }

    /// The panel with `newer`'s checkpoints added (a trail that gained checkpoints): both must
    /// score the same examples with the same gold and the same text where both say; the metrics
    /// kept are those both have. Rows stay in step order.
    pub fn merge(self, newer: Panel) -> Result<Panel> {
        let task = &self.task;
        if self.ids != newer.ids {
            bail!("task {task}: the new checkpoints score other examples than the cached ones");
        }
        if self.generation != newer.generation {
            bail!("task {task}: generation rows (gold texts) mixed with multiple-choice rows");
        }
        if let Some(s) = newer.steps.iter().find(|s| self.steps.binary_search(s).is_ok()) {
            bail!("task {task}: step {s} is both cached and new");
        }
        for (e, (old, new)) in self.hashes.iter().zip(&newer.hashes).enumerate() {
            if !old.is_empty() && !new.is_empty() && old != new {
                bail!(
                    "task {task}: example {} has other text at step {} than at step {}",
                    self.ids[e],
                    newer.steps[0],
                    self.steps[0]
                );
            }
        }
        if let Some(e) = (0..self.ids.len()).find(|&e| self.gold[e] != newer.gold[e]) {
            bail!(
                "task {task}: example {} has another target at step {} than at step {}",
                self.ids[e],
                newer.steps[0],
                self.steps[0]
            );
        }
        // (panel, row) of each merged row, in step order
        let mut order: Vec<(u64, bool, usize)> = self.steps.iter().enumerate().map(|(t, &s)| (s, false, t)).collect();
        order.extend(newer.steps.iter().enumerate().map(|(t, &s)| (s, true, t)));
        order.sort_unstable();
        // the cells moved, not cloned (a shared text's count is an atomic): each panel's rows are
        // in step order, so `order` takes each side's cells in turn
        let outputs = |a: Vec<Vec<Text>>, b: Vec<Vec<Text>>| -> Vec<Vec<Text>> {
            a.into_iter()
                .zip(b)
                .map(|(x, y)| {
                    let (mut x, mut y) = (x.into_iter(), y.into_iter());
                    order
                        .iter()
                        .map(|&(_, new, _)| if new { y.next() } else { x.next() }.expect("a cell per row"))
                        .collect()
                })
                .collect()
        };
        let mut values = BTreeMap::new();
        for (m, a) in &self.values {
            let Some(b) = newer.values.get(m) else { continue };
            let mut v = Array2::<f64>::zeros((order.len(), self.ids.len()));
            for (row, &(_, new, t)) in order.iter().enumerate() {
                v.row_mut(row).assign(&if new { b.row(t) } else { a.row(t) });
            }
            values.insert(*m, v);
        }
        Ok(Panel {
            steps: order.iter().map(|o| o.0).collect(),
            hashes: self
                .hashes
                .iter()
                .zip(&newer.hashes)
                .map(|(o, n)| if o.is_empty() { n.clone() } else { o.clone() })
                .collect(),
            outputs: outputs(self.outputs, newer.outputs),
            outputs_norm: outputs(self.outputs_norm, newer.outputs_norm),
            values,
            task: self.task,
            ids: self.ids,
            gold: self.gold,
            chance: self.chance,
            generation: self.generation,
        })
    }

    /// The panel as bytes ([`Panel::from_bytes`] reads them back): a JSON header (names, steps,
    /// ids, gold, the distinct output texts) and the matrices as little-endian f64 and u32.
    pub fn to_bytes(&self) -> Vec<u8> {
        // a cell that repeats its example's previous checkpoint (most do) is indexed without a
        // lookup (equal texts share one allocation within a panel built whole)
        let mut texts: Vec<&str> = Vec::new();
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut cells = Vec::with_capacity(2 * self.ids.len() * self.steps.len());
        for grid in [&self.outputs, &self.outputs_norm] {
            for example in grid {
                let mut last: Option<(&Text, u32)> = None;
                for t in example {
                    let i = match last {
                        Some((prev, i)) if Arc::ptr_eq(prev, t) => i,
                        _ => *index.entry(&**t).or_insert_with(|| {
                            texts.push(t);
                            (texts.len() - 1) as u32
                        }),
                    };
                    last = Some((t, i));
                    cells.push(i);
                }
            }
        }
        let header = serde_json::json!({
            "task": self.task, "steps": self.steps, "ids": self.ids, "hashes": self.hashes,
            "gold": self.gold, "chance": self.chance, "generation": self.generation,
            "metrics": self.values.keys().map(|m| m.name()).collect::<Vec<_>>(), "texts": texts,
        });
        let header = serde_json::to_vec(&header).expect("a panel's header is JSON");
        let mut out = Vec::with_capacity(8 + header.len() + 8 * self.values.len() * cells.len() / 2 + 4 * cells.len());
        records::frames::put(&mut out, &header);
        for a in self.values.values() {
            for x in a.iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        for x in &cells {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Reads [`Panel::to_bytes`]'s bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Panel> {
        #[derive(serde::Deserialize)]
        struct Header {
            task: String,
            steps: Vec<u64>,
            ids: Vec<String>,
            hashes: Vec<String>,
            gold: Vec<u32>,
            chance: f64,
            generation: bool,
            metrics: Vec<String>,
            texts: Vec<String>,
        }
        let mut cursor = records::frames::Cursor::new(bytes);
        let h: Header = serde_json::from_slice(cursor.frame()?)?;
        let (t_len, n) = (h.steps.len(), h.ids.len());
        if h.hashes.len() != n || h.gold.len() != n {
            bail!("a panel's header is inconsistent");
        }
        let mut values = BTreeMap::new();
        for name in &h.metrics {
            let m = Metric::ALL
                .into_iter()
                .find(|m| m.name() == name)
                .ok_or_else(|| anyhow::anyhow!("unknown metric {name}"))?;
            let v: Vec<f64> = cursor
                .take(8 * t_len * n)?
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            values.insert(m, Array2::from_shape_vec((t_len, n), v)?);
        }
        let texts: Vec<Text> = h.texts.iter().map(|t| Text::from(t.as_str())).collect();
        let cells: Vec<u32> =
            cursor.take(8 * t_len * n)?.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        cursor.finish()?;
        let text = |i: u32| {
            texts.get(i as usize).cloned().ok_or_else(|| anyhow::anyhow!("a panel's output index is out of range"))
        };
        let grid = |half: &[u32]| -> Result<Vec<Vec<Text>>> {
            (0..n).map(|e| half[e * t_len..(e + 1) * t_len].iter().map(|&i| text(i)).collect()).collect()
        };
        let (a, b) = cells.split_at(t_len * n);
        Ok(Panel {
            task: h.task,
            steps: h.steps,
            ids: h.ids,
            hashes: h.hashes,
            gold: h.gold,
            chance: h.chance,
            outputs: grid(a)?,
            outputs_norm: grid(b)?,
            generation: h.generation,
            values,
        })
    }

    /// The same panel on a subset of its steps (those in `keep`, which must all exist).
    pub fn restrict(&self, keep: &[u64]) -> Result<Panel> {
        let rows: Vec<usize> = keep
            .iter()
            .map(|s| {
                self.steps.binary_search(s).map_err(|_| anyhow::anyhow!("task {}: no scores at step {s}", self.task))
            })
            .collect::<Result<_>>()?;
        let pick = |v: &Vec<Vec<Text>>| v.iter().map(|o| rows.iter().map(|&t| o[t].clone()).collect()).collect();
        Ok(Panel {
            task: self.task.clone(),
            steps: keep.to_vec(),
            ids: self.ids.clone(),
            hashes: self.hashes.clone(),
            gold: self.gold.clone(),
            chance: self.chance,
            outputs: pick(&self.outputs),
            outputs_norm: pick(&self.outputs_norm),
            generation: self.generation,
            values: self.values.iter().map(|(m, a)| (*m, a.select(Axis(0), &rows))).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: u64, id: &str, correct: bool) -> ExampleRecord {
        ExampleRecord {
            step,
            task: "t".into(),
            example_id: id.into(),
            gold: 0,
            predicted: u32::from(!correct),
            predicted_norm: u32::from(!correct),
            correct,
            correct_norm: correct,
            logliks: if correct { vec![-1.0, -2.0] } else { vec![-2.0, -1.0] },
            lengths_chars: vec![1, 1],
            lengths_tokens: vec![1, 1],
            lengths_bytes: vec![],
            gold_is_greedy: false,
            output: u32::from(!correct).to_string(),
            item_hash: String::new(),
            targets: Vec::new(),
            score_names: Vec::new(),
            score_values: Vec::new(),
        }
    }

    #[test]
    fn matrices_are_in_step_and_id_order_and_gaps_are_refused() {
        let rows = vec![row(20, "b", true), row(0, "b", false), row(20, "a", false), row(0, "a", true)];
        let p = Panel::build("t", &rows.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!((p.steps.clone(), p.ids.clone()), (vec![0, 20], vec!["a".to_string(), "b".to_string()]));
        let acc = p.values(Metric::Acc).unwrap();
        assert_eq!(acc.row(0).to_vec(), vec![1.0, 0.0]);
        assert_eq!(acc.row(1).to_vec(), vec![0.0, 1.0]);
        assert_eq!(p.scores(Metric::Margin).unwrap(), vec![0.0, 0.0]);
        assert!(p.values(Metric::BitsPerByte).is_none(), "no byte counts: no matrix");
        assert_eq!(p.chance, 0.5);
        let r = p.restrict(&[20]).unwrap();
        assert_eq!(
            (r.values(Metric::Acc).unwrap().row(0).to_vec(), r.outputs[0].clone()),
            (vec![0.0, 1.0], vec![Text::from("1")])
        );
        assert!(p.restrict(&[10]).is_err());
        let gap = [row(0, "a", true), row(20, "a", true), row(0, "b", true)];
        let e = Panel::build("t", &gap.iter().collect::<Vec<_>>()).err().unwrap().to_string();
        assert!(e.contains("example b is missing"), "{e}");
    }

    /// A generation task's panel: `acc` and `char_f1` only, chance 0, the texts as outputs
    /// under both decisions; a task mixing generation and multiple-choice rows is refused.
    #[test]
    fn generation_rows_give_acc_and_char_f1() {
        let g = |step, id: &str, out: &str, ok: bool| ExampleRecord {
            logliks: vec![],
            lengths_chars: vec![],
            lengths_tokens: vec![],
            predicted: 0,
            predicted_norm: 0,
            output: out.into(),
            targets: vec!["the cat sat".into(), "a dog".into()],
            score_names: vec!["exact_match".into()],
            score_values: vec![f64::from(u8::from(ok))],
            ..row(step, id, ok)
        };
        let rows = vec![
            g(0, "a", "the cat", false),
            g(10, "a", "the cat sat", true),
            g(0, "b", "a dog", true),
            g(10, "b", "", false),
        ];
        let p = Panel::build("t", &rows.iter().collect::<Vec<_>>()).unwrap();
        assert!(p.generation);
        assert_eq!(p.metrics(), vec![Metric::Acc, Metric::CharF1]);
        assert_eq!(p.chance, 0.0);
        assert_eq!(p.values(Metric::Acc).unwrap().row(1).to_vec(), vec![1.0, 0.0]);
        let f1 = p.values(Metric::CharF1).unwrap();
        assert_eq!((f1[[1, 0]], f1[[0, 1]], f1[[1, 1]]), (1.0, 1.0, 0.0));
        assert_eq!(f1[[0, 0]], textmatch::char_f1("the cat", "the cat sat"));
        assert_eq!(p.outputs_norm[0], vec![Text::from("the cat"), Text::from("the cat sat")]);
        assert_eq!(p.restrict(&[10]).unwrap().outputs[1], vec![Text::from("")]);
        assert!(Arc::ptr_eq(&p.outputs[0][0], &p.outputs_norm[0][0]), "equal texts share one allocation");
        let mixed = vec![g(0, "a", "x", false), row(0, "b", true)];
        let e = Panel::build("t", &mixed.iter().collect::<Vec<_>>()).err().unwrap().to_string();
        assert!(e.contains("mixed"), "{e}");
    }

    /// Each example's hash is the first one any checkpoint gives (rows of older tables have
    /// none); two checkpoints that give one example different text are refused by name.
    #[test]
    fn hashes_are_kept_and_other_text_is_refused() {
        let h = |step, id: &str, hash: &str| ExampleRecord { item_hash: hash.into(), ..row(step, id, true) };
        let rows =
            vec![h(0, "a", ""), h(20, "a", "aa"), h(10, "a", "aa"), h(0, "b", ""), h(10, "b", ""), h(20, "b", "")];
        let p = Panel::build("t", &rows.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(p.hashes, vec!["aa".to_string(), String::new()]);
        assert_eq!(p.restrict(&[0]).unwrap().hashes, p.hashes);
        let rows = vec![h(0, "a", "aa"), h(10, "a", ""), h(20, "a", "ab")];
        let e = Panel::build("t", &rows.iter().collect::<Vec<_>>()).err().unwrap().to_string();
        assert_eq!(e, "task t: example a has other text at step 20 than at step 0");
    }

    /// Every field of two panels, for the tests.
    fn same(a: &Panel, b: &Panel) {
        assert_eq!((&a.task, &a.steps, &a.ids, &a.hashes, &a.gold), (&b.task, &b.steps, &b.ids, &b.hashes, &b.gold));
        assert_eq!((a.chance, a.generation, a.metrics()), (b.chance, b.generation, b.metrics()));
        for m in a.metrics() {
            assert_eq!(a.values(m).unwrap(), b.values(m).unwrap(), "{m:?}");
        }
        assert_eq!((&a.outputs, &a.outputs_norm), (&b.outputs, &b.outputs_norm));
    }

    /// What the ingest cache keeps of a panel reads back whole, and a panel of some checkpoints
    /// merged with one of the others is the panel of all (in step order, whichever came first).
    #[test]
    fn bytes_round_trip_and_merging_checkpoints_equals_building_them_all() {
        let h = |step, id: &str, ok: bool, hash: &str| ExampleRecord { item_hash: hash.into(), ..row(step, id, ok) };
        let rows = vec![
            h(0, "a", true, ""),
            h(0, "b", false, "bb"),
            h(10, "a", false, "aa"),
            h(10, "b", true, ""),
            h(20, "a", true, ""),
            h(20, "b", true, "bb"),
        ];
        let build = |keep: &dyn Fn(u64) -> bool| {
            Panel::build("t", &rows.iter().filter(|r| keep(r.step)).collect::<Vec<_>>()).unwrap()
        };
        let all = build(&|_| true);
        same(&Panel::from_bytes(&all.to_bytes()).unwrap(), &all);
        same(&build(&|s| s != 10).merge(build(&|s| s == 10)).unwrap(), &all);
        same(&build(&|s| s == 20).merge(build(&|s| s < 20)).unwrap(), &all);
        // new checkpoints after the cached ones, and the bytes of a merged panel (its equal texts
        // two allocations) are the bytes of the panel built whole
        let appended = build(&|s| s < 20).merge(build(&|s| s == 20)).unwrap();
        same(&appended, &all);
        assert_eq!(appended.to_bytes(), all.to_bytes());
        let bytes = all.to_bytes();
        assert!(Panel::from_bytes(&bytes[..bytes.len() - 1]).is_err(), "a cut panel is an error");
        // other text, another target, other examples or a step twice are refused
        let e = build(&|s| s == 0).merge(Panel::build("t", &[&h(10, "a", true, ""), &h(10, "b", true, "zz")]).unwrap());
        assert_eq!(e.err().unwrap().to_string(), "task t: example b has other text at step 10 than at step 0");
        let other_gold = ExampleRecord { gold: 1, ..row(10, "a", true) };
        assert!(build(&|s| s == 0).merge(Panel::build("t", &[&other_gold, &row(10, "b", true)]).unwrap()).is_err());
        assert!(build(&|s| s == 0).merge(Panel::build("t", &[&row(10, "a", true)]).unwrap()).is_err());
        assert!(build(&|s| s == 0).merge(build(&|s| s == 0)).is_err());
    }
}
