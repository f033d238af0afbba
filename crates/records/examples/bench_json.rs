//! Which JSON parser reads lm-eval `--log_samples` lines fastest (issue 29 item 2).
//!
//! `cargo run --release --example bench_json -- <samples.jsonl> [rounds]` parses every line of
//! the file into the fields the multiple-choice reader needs (doc_id, doc_hash, target, the
//! continuations of `arguments`, the log-likelihood and greedy flag of each response of
//! `filtered_resps` / `resps`, `acc`, `acc_norm` and the metrics the `metrics` list names) with:
//!
//! - (a) `serde_json::Value` per line, then the fields picked out (the reader before this work);
//! - (b) serde_json into borrowed values (`Cow<str>`), `doc` skipped unread
//!   ([`records::harness::SampleLine`], the reader now);
//! - (c) simd-json's borrowed DOM (the line copied into a reused buffer, reused parser buffers);
//! - (d) sonic-rs's DOM.
//!
//! The contenders run interleaved, round by round; every contender's fields must equal (a)'s on
//! every line (asserted, floats bit for bit). Prints per contender the median, min and max lines/s
//! over the rounds and the ratio to (a) of each round.

use std::borrow::Cow;
use std::time::Instant;

/// The fields of one line, as the reader uses them.
#[derive(Debug, PartialEq, Default)]
struct Fields {
    doc_id: String,
    doc_hash: String,
    /// `n:<bits of the f64>` for a number (or a string holding one), `s:<text>`, else `?`
    target: String,
    /// the `arg_1` (continuation) of each option, in option order
    conts: Vec<String>,
    /// per response: the log-likelihood's bits and the greedy flag
    resps: Vec<(Option<u64>, bool)>,
    acc: Option<u64>,
    acc_norm: Option<u64>,
    metrics: Vec<(String, u64)>,
}

fn target_key(num: Option<f64>, text: Option<&str>) -> String {
    match (num, text) {
        (Some(x), _) => format!("n:{}", x.to_bits()),
        (None, Some(t)) => format!("s:{t}"),
        _ => "?".into(),
    }
}

fn arg_order(k: &str) -> usize {
    k.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<usize>().unwrap_or(0)
}

/// (a): the reader's code before this work, on `serde_json::Value`.
mod value {
    use super::*;
    use serde_json::Value;

    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn response(r: &Value) -> (Option<f64>, Option<bool>) {
        let r =
            r.as_array().and_then(|a| if a.first().is_some_and(Value::is_array) { a[0].as_array() } else { Some(a) });
        match r {
            Some(a) if !a.is_empty() => {
                (num(&a[0]), a.get(1).map(|g| g.as_bool().unwrap_or(matches!(g.as_str(), Some("True" | "true")))))
            }
            _ => (None, None),
        }
    }

    fn arguments(v: &Value) -> Vec<(String, String)> {
        let pair = |a: &Value, b: &Value| (a.as_str().unwrap_or("").to_string(), b.as_str().unwrap_or("").to_string());
        match v {
            Value::Array(items) => {
                items.iter().filter_map(|i| i.as_array().filter(|p| p.len() >= 2).map(|p| pair(&p[0], &p[1]))).collect()
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by_key(|k| arg_order(k));
                keys.into_iter().map(|k| pair(&map[k]["arg_0"], &map[k]["arg_1"])).collect()
            }
            _ => Vec::new(),
        }
    }

    pub fn fields(line: &str) -> Fields {
        let v: Value = serde_json::from_str(line).unwrap();
        let resps = v
            .get("filtered_resps")
            .and_then(Value::as_array)
            .or_else(|| v.get("resps").and_then(Value::as_array))
            .unwrap();
        let resps = resps
            .iter()
            .map(|r| {
                let (ll, g) = response(r);
                (ll.map(f64::to_bits), g.unwrap_or(false))
            })
            .collect();
        let conts = v.get("arguments").map(arguments).unwrap_or_default().into_iter().map(|(_, c)| c).collect();
        let target = v.get("target").unwrap();
        let doc_id = match v.get("doc_id") {
            Some(Value::String(s)) => s.clone(),
            Some(d) => d.to_string(),
            None => String::new(),
        };
        let doc_hash = match v.get("doc_hash") {
            Some(Value::String(h)) => h.clone(),
            _ => String::new(),
        };
        let metrics = v
            .get("metrics")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(|k| Some((k.to_string(), num(v.get(k)?)?.to_bits())))
                    .collect()
            })
            .unwrap_or_default();
        Fields {
            doc_id,
            doc_hash,
            target: target_key(num(target), target.as_str()),
            conts,
            resps,
            acc: v.get("acc").and_then(num).map(f64::to_bits),
            acc_norm: v.get("acc_norm").and_then(num).map(f64::to_bits),
            metrics,
        }
    }
}

/// (b): serde_json into borrowed values: the reader's own [`records::harness::SampleLine`].
mod borrowed {
    use super::*;
    use records::harness::{Lite, SampleLine};

    pub fn fields(line: &str) -> Fields {
        let v: SampleLine = serde_json::from_str(line).unwrap();
        let resps = v.responses().unwrap();
        let resps = resps
            .iter()
            .map(|r| {
                let (ll, g) = r.response();
                (ll.map(f64::to_bits), g.unwrap_or(false))
            })
            .collect();
        let conts = v.continuations().into_iter().map(Cow::into_owned).collect();
        let target = v.get("target").unwrap();
        let doc_id = match v.get("doc_id") {
            Some(Lite::Str(s)) => s.to_string(),
            Some(d) => d.to_value().to_string(),
            None => String::new(),
        };
        let doc_hash = match v.get("doc_hash") {
            Some(Lite::Str(h)) => h.to_string(),
            _ => String::new(),
        };
        let metrics = match v.get("metrics") {
            Some(Lite::Arr(names)) => names
                .iter()
                .filter_map(Lite::as_str)
                .filter_map(|k| Some((k.to_string(), v.get(k)?.num()?.to_bits())))
                .collect(),
            _ => Vec::new(),
        };
        Fields {
            doc_id,
            doc_hash,
            target: target_key(target.num(), target.as_str()),
            conts,
            resps,
            acc: v.get("acc").and_then(Lite::num).map(f64::to_bits),
            acc_norm: v.get("acc_norm").and_then(Lite::num).map(f64::to_bits),
            metrics,
        }
    }
}

/// (c): simd-json's borrowed DOM.
mod simd {
    use super::*;
    use simd_json::borrowed::Value;
    use simd_json::StaticNode;

    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Static(StaticNode::F64(f)) => Some(*f),
            Value::Static(StaticNode::I64(i)) => Some(*i as f64),
            Value::Static(StaticNode::U64(u)) => Some(*u as f64),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn as_str<'a>(v: &'a Value) -> Option<&'a str> {
        match v {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    fn get<'a, 'v>(v: &'a Value<'v>, k: &str) -> Option<&'a Value<'v>> {
        match v {
            Value::Object(o) => o.get(k),
            _ => None,
        }
    }

    fn arr<'a, 'v>(v: &'a Value<'v>) -> Option<&'a Vec<Value<'v>>> {
        match v {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    fn response(r: &Value) -> (Option<f64>, Option<bool>) {
        let r = arr(r).and_then(|a| if a.first().and_then(arr).is_some() { arr(&a[0]) } else { Some(a) });
        match r {
            Some(a) if !a.is_empty() => (
                num(&a[0]),
                a.get(1).map(|g| match g {
                    Value::Static(StaticNode::Bool(b)) => *b,
                    g => matches!(as_str(g), Some("True" | "true")),
                }),
            ),
            _ => (None, None),
        }
    }

    fn continuations(v: &Value) -> Vec<String> {
        match v {
            Value::Array(items) => items
                .iter()
                .filter_map(|i| arr(i).filter(|p| p.len() >= 2).map(|p| as_str(&p[1]).unwrap_or("").to_string()))
                .collect(),
            Value::Object(map) => {
                let mut keys: Vec<&str> = map.keys().map(|k| k.as_ref()).collect();
                keys.sort();
                keys.sort_by_key(|k| arg_order(k));
                keys.into_iter().map(|k| get(&map[k], "arg_1").and_then(as_str).unwrap_or("").to_string()).collect()
            }
            _ => Vec::new(),
        }
    }

    pub struct Parser {
        copy: Vec<u8>,
        buffers: simd_json::Buffers,
    }

    impl Parser {
        pub fn new() -> Parser {
            Parser { copy: Vec::new(), buffers: simd_json::Buffers::new(4096) }
        }

        pub fn fields(&mut self, line: &str) -> Fields {
            self.copy.clear();
            self.copy.extend_from_slice(line.as_bytes());
            let v = simd_json::borrowed::to_value_with_buffers(&mut self.copy, &mut self.buffers).unwrap();
            let resps = get(&v, "filtered_resps").and_then(arr).or_else(|| get(&v, "resps").and_then(arr)).unwrap();
            let resps = resps
                .iter()
                .map(|r| {
                    let (ll, g) = response(r);
                    (ll.map(f64::to_bits), g.unwrap_or(false))
                })
                .collect();
            let conts = get(&v, "arguments").map(continuations).unwrap_or_default();
            let target = get(&v, "target").unwrap();
            let doc_id = match get(&v, "doc_id") {
                Some(Value::String(s)) => s.to_string(),
                Some(d) => d.to_string(),
                None => String::new(),
            };
            let doc_hash = get(&v, "doc_hash").and_then(as_str).unwrap_or("").to_string();
            let metrics = get(&v, "metrics")
                .and_then(arr)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(as_str)
                        .filter_map(|k| Some((k.to_string(), num(get(&v, k)?)?.to_bits())))
                        .collect()
                })
                .unwrap_or_default();
            Fields {
                doc_id,
                doc_hash,
                target: target_key(num(target), as_str(target)),
                conts,
                resps,
                acc: get(&v, "acc").and_then(num).map(f64::to_bits),
                acc_norm: get(&v, "acc_norm").and_then(num).map(f64::to_bits),
                metrics,
            }
        }
    }
}

/// (d): sonic-rs's DOM.
mod sonic {
    use super::*;
    use sonic_rs::{JsonContainerTrait, JsonValueTrait, Value};

    fn num(v: &Value) -> Option<f64> {
        if v.is_number() {
            v.as_f64()
        } else {
            v.as_str().and_then(|s| s.trim().parse().ok())
        }
    }

    fn response(r: &Value) -> (Option<f64>, Option<bool>) {
        let r =
            r.as_array().and_then(|a| if a.first().is_some_and(|x| x.is_array()) { a[0].as_array() } else { Some(a) });
        match r {
            Some(a) if !a.is_empty() => {
                (num(&a[0]), a.get(1).map(|g| g.as_bool().unwrap_or(matches!(g.as_str(), Some("True" | "true")))))
            }
            _ => (None, None),
        }
    }

    fn continuations(v: &Value) -> Vec<String> {
        if let Some(items) = v.as_array() {
            items
                .iter()
                .filter_map(|i| i.as_array().filter(|p| p.len() >= 2).map(|p| p[1].as_str().unwrap_or("").to_string()))
                .collect()
        } else if let Some(map) = v.as_object() {
            let mut keys: Vec<(&str, &Value)> = map.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            keys.sort_by_key(|(k, _)| arg_order(k));
            keys.into_iter().map(|(_, x)| x.get("arg_1").and_then(|c| c.as_str()).unwrap_or("").to_string()).collect()
        } else {
            Vec::new()
        }
    }

    pub fn fields(line: &str) -> Fields {
        let v: Value = sonic_rs::from_str(line).unwrap();
        let resps = v
            .get("filtered_resps")
            .and_then(|r| r.as_array())
            .or_else(|| v.get("resps").and_then(|r| r.as_array()))
            .unwrap();
        let resps = resps
            .iter()
            .map(|r| {
                let (ll, g) = response(r);
                (ll.map(f64::to_bits), g.unwrap_or(false))
            })
            .collect();
        let conts = v.get("arguments").map(continuations).unwrap_or_default();
        let target = v.get("target").unwrap();
        let doc_id = match v.get("doc_id") {
            Some(d) if d.is_str() => d.as_str().unwrap().to_string(),
            Some(d) => d.to_string(),
            None => String::new(),
        };
        let doc_hash = v.get("doc_hash").and_then(|h| h.as_str()).unwrap_or("").to_string();
        let metrics = v
            .get("metrics")
            .and_then(|m| m.as_array())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str())
                    .filter_map(|k| Some((k.to_string(), num(v.get(k)?)?.to_bits())))
                    .collect()
            })
            .unwrap_or_default();
        Fields {
            doc_id,
            doc_hash,
            target: target_key(num(target), target.as_str()),
            conts,
            resps,
            acc: v.get("acc").and_then(num).map(f64::to_bits),
            acc_norm: v.get("acc_norm").and_then(num).map(f64::to_bits),
            metrics,
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: bench_json <samples.jsonl> [rounds (default 7)]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(2).map_or(7, |r| r.parse().expect("rounds: a whole number"));
    let text = std::fs::read_to_string(path).expect("cannot read the samples file");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    println!(
        "{path}: {} lines, {:.0} bytes a line on average, {rounds} rounds",
        lines.len(),
        bytes as f64 / lines.len() as f64
    );

    // every contender must give (a)'s fields on every line
    let mut simd = simd::Parser::new();
    for (i, l) in lines.iter().enumerate() {
        let a = value::fields(l);
        assert_eq!(borrowed::fields(l), a, "line {}: (b) differs from (a)", i + 1);
        assert_eq!(simd.fields(l), a, "line {}: (c) differs from (a)", i + 1);
        assert_eq!(sonic::fields(l), a, "line {}: (d) differs from (a)", i + 1);
    }
    println!("all {} lines: the four contenders extract identical fields", lines.len());

    let names = [
        "(a) serde_json::Value (before)",
        "(b) serde_json borrowed (SampleLine)",
        "(c) simd-json borrowed DOM",
        "(d) sonic-rs DOM",
    ];
    let mut rate = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        for (c, r) in rate.iter_mut().enumerate() {
            // a checksum keeps the work from being optimised away
            let mut sum = 0usize;
            let t = Instant::now();
            for l in &lines {
                let f = match c {
                    0 => value::fields(l),
                    1 => borrowed::fields(l),
                    2 => simd.fields(l),
                    _ => sonic::fields(l),
                };
                sum = sum.wrapping_add(f.resps.len() + f.doc_id.len());
            }
            let s = t.elapsed().as_secs_f64();
            std::hint::black_box(sum);
            r.push(lines.len() as f64 / s);
        }
        println!(
            "round {}: {}",
            round + 1,
            (0..names.len()).map(|c| format!("{:.0}", rate[c][round])).collect::<Vec<_>>().join(" / ")
        );
    }
    println!("\n| contender | median lines/s | min | max | ratio to (a) per round (median) |");
    println!("|---|---|---|---|---|");
    for (c, name) in names.iter().enumerate() {
        let ratios: Vec<f64> = (0..rounds).map(|r| rate[c][r] / rate[0][r]).collect();
        let rmin = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let rmax = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.2}x ({:.2}-{:.2}) |",
            median(&rate[c]),
            rate[c].iter().copied().fold(f64::INFINITY, f64::min),
            rate[c].iter().copied().fold(0.0, f64::max),
            median(&ratios),
            rmin,
            rmax
        );
    }
}
