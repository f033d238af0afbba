//! The paper: fills `paper/template.md` with the tables and figures of a run and writes it.
//!
//! In the template, `{{table:NAME}}` becomes the Markdown of `<figures>/NAME.md`,
//! `{{figures}}` the path of the figures folder relative to the written paper, and
//! `{{provenance}}` the commit and inputs every figure and table recorded. A placeholder with
//! no file behind it, or an image the figures folder lacks, is an error naming both.

use anyhow::{bail, Context, Result};
use clap::Parser;
use experiments::{Output, Run};
use std::path::{Component, Path, PathBuf};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "paper/template.md")]
    template: PathBuf,
    /// Folder the figure and table binaries wrote to
    #[arg(long, default_value = "figures")]
    figures: PathBuf,
    #[arg(long, default_value = "paper/paper.md")]
    out: PathBuf,
}

/// `to` relative to the folder `from` (both relative to the same base, or both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    fn norm(p: &Path) -> Vec<Component<'_>> {
        p.components().filter(|c| !matches!(c, Component::CurDir)).collect()
    }
    let (f, t) = (norm(from), norm(to));
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut r: PathBuf = f[common..].iter().map(|_| "..").collect();
    r.extend(&t[common..]);
    if r.as_os_str().is_empty() {
        r.push(".");
    }
    r
}

/// Replaces every `{{key}}` by `fill(key)`.
fn expand(template: &str, mut fill: impl FnMut(&str) -> Result<String>) -> Result<String> {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out += &rest[..i];
        let j = rest[i..]
            .find("}}")
            .with_context(|| format!("unclosed `{{{{` at {:?}", &rest[i..rest.len().min(i + 30)]))?;
        out += &fill(rest[i + 2..i + j].trim())?;
        rest = &rest[i + j + 2..];
    }
    out += rest;
    Ok(out)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let template = std::fs::read_to_string(&args.template)
        .with_context(|| format!("{}: cannot read the template", args.template.display()))?;
    let run = Run::new(&args.figures)?;
    run.also_read(&args.template);
    let paper_dir = args.out.parent().unwrap_or(Path::new(".")).to_path_buf();
    let rel = relative(&paper_dir, &args.figures);
    let mut sidecars = vec![];
    let text = expand(&template, |key| {
        if key == "figures" {
            return Ok(rel.display().to_string());
        }
        if key == "provenance" {
            return Ok(String::from("{{provenance}}")); // filled below, once every table is in
        }
        let Some(name) = key.strip_prefix("table:") else {
            bail!("{}: unknown placeholder {{{{{key}}}}}", args.template.display())
        };
        sidecars.push(args.figures.join(format!("{name}.provenance.json")));
        let p = run.file(&format!("{name}.md"))?;
        Ok(std::fs::read_to_string(&p)?.trim_end().to_string())
    })?;
    // every image the paper points at must exist
    let marker = format!("]({}/", rel.display());
    for (i, _) in text.match_indices(&marker) {
        let name: String = text[i + marker.len()..].chars().take_while(|c| *c != ')').collect();
        sidecars.push(args.figures.join(name.replace(".png", ".provenance.json")));
        run.file(&name).with_context(|| format!("{}: the paper shows {name}", args.template.display()))?;
    }
    let mut prov = String::from("| output | commit | inputs |\n|---|---|---|\n");
    for s in &sidecars {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.file(&s.file_name().unwrap().to_string_lossy())?)?)
                .with_context(|| format!("{}: not JSON", s.display()))?;
        let inputs: Vec<&str> =
            v["inputs"].as_array().map(|a| a.iter().filter_map(|i| i["path"].as_str()).collect()).unwrap_or_default();
        let mut folders: Vec<String> = vec![];
        for f in inputs.iter().map(|p| Path::new(p).parent().map_or(String::new(), |d| d.display().to_string())) {
            if !folders.contains(&f) {
                folders.push(f);
            }
        }
        prov += &format!(
            "| {} | `{}` | {} files from {} |\n",
            v["output"].as_str().unwrap_or("?"),
            v["commit"].as_str().unwrap_or("?"),
            inputs.len(),
            folders.join(", ")
        );
    }
    let text = text.replace("{{provenance}}", prov.trim_end());
    if args.out.extension().is_none_or(|e| e != "md") {
        bail!("{}: the paper is Markdown; name it *.md", args.out.display());
    }
    let stem = args.out.file_stem().unwrap_or_default().to_string_lossy().to_string();
    Output::new(&paper_dir, &stem)?.files(&[("md", text.into_bytes())], &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_between_sibling_and_nested_folders() {
        assert_eq!(relative(Path::new("paper"), Path::new("figures")), PathBuf::from("../figures"));
        assert_eq!(relative(Path::new("runs/smoke"), Path::new("runs/smoke/figures")), PathBuf::from("figures"));
        assert_eq!(relative(Path::new("./a"), Path::new("a")), PathBuf::from("."));
    }

    #[test]
    fn placeholders_expand_and_unclosed_ones_are_errors() {
        let out = expand("a {{x}} b {{ y }}", |k| Ok(k.to_uppercase())).unwrap();
        assert_eq!(out, "a X b Y");
        assert!(expand("a {{x", |k| Ok(k.into())).is_err());
    }
}
