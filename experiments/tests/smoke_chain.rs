//! The smoke chain after evaluation, on the committed tables of a smoke run
//! (`tests/fixtures/smoke`): ensembles, analysis and stability tables are rebuilt as `just
//! reproduce smoke` builds them and snapshotted; then every figure and table binary runs on them
//! and must write a non-empty image or table with its provenance; then the paper is built.

use analysis::Options;
use integrate::ensemble::{ensemble_rows, Rule};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/smoke");

/// Every figure and table binary (`src/bin/` minus `paper`), with its path.
const BINARIES: [(&str, &str); 18] = [
    ("fig1_scores", env!("CARGO_BIN_EXE_fig1_scores")),
    ("fig2_example_heatmap", env!("CARGO_BIN_EXE_fig2_example_heatmap")),
    ("fig3_flip_rates", env!("CARGO_BIN_EXE_fig3_flip_rates")),
    ("fig4_integration", env!("CARGO_BIN_EXE_fig4_integration")),
    ("fig5_window_size", env!("CARGO_BIN_EXE_fig5_window_size")),
    ("fig6_loss_vs_scores", env!("CARGO_BIN_EXE_fig6_loss_vs_scores")),
    ("fig7_pythia", env!("CARGO_BIN_EXE_fig7_pythia")),
    ("fig8_study", env!("CARGO_BIN_EXE_fig8_study")),
    ("fig9_generation", env!("CARGO_BIN_EXE_fig9_generation")),
    ("table1_main_results", env!("CARGO_BIN_EXE_table1_main_results")),
    ("table2_stability", env!("CARGO_BIN_EXE_table2_stability")),
    ("table3_claims", env!("CARGO_BIN_EXE_table3_claims")),
    ("table4_snr", env!("CARGO_BIN_EXE_table4_snr")),
    ("table5_size_trend", env!("CARGO_BIN_EXE_table5_size_trend")),
    ("table6_study_tasks", env!("CARGO_BIN_EXE_table6_study_tasks")),
    ("table7_study_runs", env!("CARGO_BIN_EXE_table7_study_runs")),
    ("table8_claim_contrasts", env!("CARGO_BIN_EXE_table8_claim_contrasts")),
    ("table9_generation", env!("CARGO_BIN_EXE_table9_generation")),
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

fn csv(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What `integrate ensemble --windows 1,2,4,8,16` (and `--rule vote --windows 4,16`), `analysis
/// report` and `analysis compare` write.
fn rebuild_after_eval(run: &Path) {
    let rows = records::read_examples(&run.join("eval/examples.parquet")).unwrap();
    let windows = [
        (Rule::Distribution, 1, "ensembled"),
        (Rule::Distribution, 2, "ensembled"),
        (Rule::Distribution, 4, "ensembled"),
        (Rule::Distribution, 8, "ensembled"),
        (Rule::Distribution, 16, "ensembled"),
        (Rule::Vote, 4, "ensembled-vote"),
        (Rule::Vote, 16, "ensembled-vote"),
    ];
    for (rule, k, folder) in windows {
        let e = ensemble_rows(&rows, k, rule).unwrap();
        let dir = run.join(format!("{folder}/k{k}"));
        records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(&e).unwrap()).unwrap();
        let mut tf = records::tasks_frame(&records::summarise(&e).unwrap()).unwrap();
        records::write_frame(&dir.join("tasks.parquet"), &mut tf).unwrap();
        records::write_frame(&dir.join("tasks.csv"), &mut tf).unwrap();
    }
    let opts = Options::default();
    analysis::report::write(&analysis::report::load_input(run).unwrap(), &run.join("analysis"), &opts, false).unwrap();
    let (stability, differences, _) = analysis::compare::compare(run, &opts).unwrap();
    records::write_frame(&run.join("analysis/stability.csv"), &mut records::frame_of(&stability).unwrap()).unwrap();
    records::write_frame(&run.join("analysis/differences.csv"), &mut records::frame_of(&differences).unwrap()).unwrap();
}

/// A study grid of the analysed smoke run under `dir/results` (as `just study` lays it out): two
/// seeds of it, a WSD run and a wider one, told apart by their configs only (the tables are the
/// smoke run's), for the study tables and figure.
fn study_results(dir: &Path, run: &Path) {
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    for (name, from, to) in [
        ("cosine-s1", "seed = 1234", "seed = 1234"),
        ("cosine-s2", "seed = 1234", "seed = 99"),
        ("wsd-s1", "schedule = \"cosine\"", "schedule = \"wsd\""),
        ("wide-s1", "d_model = 64", "d_model = 96"),
    ] {
        let to_dir = dir.join("results").join(name);
        copy_dir(run, &to_dir);
        assert!(config.contains(from));
        std::fs::write(to_dir.join("config.toml"), config.replace(from, to)).unwrap();
        // two seeds with generation results (`just study-gen`): table 9 per run and per recipe
        if name.starts_with("cosine") {
            let gen = to_dir.join("generation");
            copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/generation"), &gen);
            std::fs::write(gen.join("config.toml"), config.replace(from, to)).unwrap();
        }
    }
}

/// Runs a binary in `dir` as `just` would (`--run smoke --out figures`), so that paths in its
/// outputs are the same on every machine.
fn run_binary(name: &str, exe: &str, dir: &Path) -> String {
    let pythia = Path::new(ROOT).join("data/external/pythia-v1-zero-shot");
    let o = Command::new(exe)
        .current_dir(dir)
        .env("RUST_LIB_BACKTRACE", "0")
        .args([
            "--run".as_ref(),
            "smoke".as_ref(),
            "--out".as_ref(),
            "figures".as_ref(),
            "--pythia".as_ref(),
            pythia.as_os_str(),
            "--results".as_ref(),
            "results".as_ref(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{name} failed:\n{stderr}");
    stderr
}

#[test]
fn every_binary_is_tested() {
    let mut names: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().to_string())
        .filter(|n| n != "paper")
        .collect();
    names.sort();
    assert_eq!(names, BINARIES.map(|b| b.0), "a figure or table binary is missing from BINARIES");
}

#[test]
fn smoke_chain_tables_figures_and_paper() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("smoke");
    copy_dir(Path::new(FIXTURE), &run);
    rebuild_after_eval(&run);
    study_results(tmp.path(), &run);

    // every table the chain writes after evaluation
    for k in [1, 2, 4, 8, 16] {
        insta::assert_snapshot!(
            format!("ensembled_k{k}_tasks_csv"),
            csv(&run.join(format!("ensembled/k{k}/tasks.csv")))
        );
    }
    insta::assert_snapshot!("analysis_task_metrics_csv", csv(&run.join("analysis/task_metrics.csv")));
    insta::assert_snapshot!("analysis_example_metrics_csv", csv(&run.join("analysis/example_metrics.csv")));
    insta::assert_snapshot!("analysis_stability_csv", csv(&run.join("analysis/stability.csv")));

    // every figure and table binary
    let figures = tmp.path().join("figures");
    for (name, exe) in BINARIES {
        run_binary(name, exe, tmp.path());
        let files: Vec<(&str, PathBuf)> = if name.starts_with("fig") {
            vec![("svg", figures.join(format!("{name}.svg"))), ("png", figures.join(format!("{name}.png")))]
        } else {
            vec![("md", figures.join(format!("{name}.md"))), ("csv", figures.join(format!("{name}.csv")))]
        };
        for (ext, p) in &files {
            let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{name} wrote no {}: {e}", p.display()));
            let least = if name.starts_with("fig") { 5000 } else { 100 };
            assert!(bytes.len() > least, "{}: only {} bytes", p.display(), bytes.len());
            match *ext {
                "png" => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display()),
                "svg" => assert!(String::from_utf8_lossy(&bytes).contains("<svg"), "{}", p.display()),
                _ => {}
            }
        }
        let prov: serde_json::Value =
            serde_json::from_str(&csv(&figures.join(format!("{name}.provenance.json")))).unwrap();
        assert!(!prov["commit"].as_str().unwrap().is_empty(), "{name}: no commit in the provenance");
        let inputs = prov["inputs"].as_array().unwrap();
        assert!(!inputs.is_empty(), "{name}: no inputs in the provenance");
        for i in inputs {
            let p = tmp.path().join(i["path"].as_str().unwrap());
            assert_eq!(
                i["sha256"].as_str().unwrap(),
                output::provenance::sha256_file(&p).unwrap(),
                "{name}: input hash of {}",
                p.display()
            );
        }
        if name.starts_with("table") {
            insta::assert_snapshot!(format!("{name}_md"), csv(&figures.join(format!("{name}.md"))));
        }
    }

    // a second run over the same inputs writes nothing: same bytes, same timestamps
    let png = figures.join("fig1_scores.png");
    let before = (std::fs::read(&png).unwrap(), std::fs::metadata(&png).unwrap().modified().unwrap());
    let stderr = run_binary("fig1_scores", BINARIES[0].1, tmp.path());
    assert!(stderr.contains("unchanged"), "{stderr}");
    assert_eq!(before, (std::fs::read(&png).unwrap(), std::fs::metadata(&png).unwrap().modified().unwrap()));

    // the paper embeds every figure and table
    let paper = tmp.path().join("paper.md");
    let o = Command::new(env!("CARGO_BIN_EXE_paper"))
        .current_dir(tmp.path())
        .args([
            "--template".as_ref(),
            Path::new(ROOT).join("paper/template.md").as_os_str(),
            "--figures".as_ref(),
            "figures".as_ref(),
            "--out".as_ref(),
            "paper.md".as_ref(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "paper failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let text = csv(&paper);
    assert!(!text.contains("{{"), "a placeholder is left in the paper");
    for (name, _) in BINARIES {
        let shown = if name.starts_with("fig") {
            text.contains(&format!("](figures/{name}.png)"))
        } else {
            text.contains(&csv(&figures.join(format!("{name}.md"))).lines().next().unwrap().to_string())
        };
        assert!(shown, "the paper does not show {name}");
    }
}

#[test]
fn a_run_without_analysis_tables_is_an_error_naming_the_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("smoke");
    copy_dir(Path::new(FIXTURE), &run);
    let o = Command::new(BINARIES[2].1)
        .current_dir(tmp.path())
        .env("RUST_LIB_BACKTRACE", "0")
        .args(["--run", "smoke", "--out", "figures"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("analysis/example_metrics.csv") && e.contains("missing"), "{e}");
}
