"""Makes crates/records/tests/fixtures/lighteval/ with the real lighteval 0.13.0, offline.

Three checkpoints of a tiny GPT-2 (1 layer, 32 dims, trained here for 25, 50 and 75 steps on the
tasks' texts, saved as `<work>/ckpt/step{1000,2000,3000}`) with a byte-level BPE tokenizer
trained here, are evaluated by
`lighteval accelerate` on two custom tasks read from local JSON-lines files (no hub access):

- `tinymc`: multiple choice (loglikelihood), `Metrics.loglikelihood_acc`, 5 docs of 3-4 options;
- `tinyqa`: generative, `Metrics.exact_match`, 5 docs, at most 6 new tokens.

All three runs share one `--output-dir`; each writes `results/<model>/results_<ts>.json` and
`details/<model>/<ts>/details_<task>|<fewshot>_<ts>.parquet` there, <model> being the model path
as given (`ckpt/step<N>`). The output folder is copied to <fixture> as it is.

Usage (in a throwaway venv, never the project's):
    python -m venv /tmp/lev && /tmp/lev/bin/pip install lighteval==0.13.0 "xxhash<4"
    (xxhash 4 refuses the `str` that lighteval 0.13's `DetailsLogger.log` hashes; the fixture was
    made with torch 2.15.0, transformers 5.25.0, datasets 5.2.0, pyarrow 26.0.1, xxhash 3.8.2)
    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 /tmp/lev/bin/python scripts/make_lighteval_fixture.py \
        /tmp/lev-work crates/records/tests/fixtures/lighteval
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

work = Path(sys.argv[1]).absolute()
fixture = Path(sys.argv[2]).absolute()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)

MC = [
    {"q": "What color is the sky on a clear day?", "choices": ["blue", "green", "red"], "gold": 0},
    {"q": "How many legs has a cat?", "choices": ["two", "four", "six", "eight"], "gold": 1},
    {"q": "Which is a fruit?", "choices": ["carrot", "potato", "apple"], "gold": 2},
    {"q": "What do bees make?", "choices": ["honey", "milk", "silk", "wool"], "gold": 0},
    {"q": "Which animal barks?", "choices": ["cow", "dog", "fish"], "gold": 1},
]
QA = [
    {"q": "2 plus 2 is", "answer": "4"},
    {"q": "The capital of France is", "answer": "Paris"},
    {"q": "The opposite of hot is", "answer": "cold"},
    {"q": "A baby cat is a", "answer": "kitten"},
    {"q": "Ice is frozen", "answer": "water"},
]
for name, rows in [("mc", MC), ("qa", QA)]:
    d = work / "data" / name
    d.mkdir(parents=True)
    with open(d / "test.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

(work / "tasks.py").write_text(
    f'''
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc


def mc_prompt(line, task_name=None):
    return Doc(task_name=task_name, query=f"Question: {{line['q']}}\\nAnswer:",
               choices=[f" {{c}}" for c in line["choices"]], gold_index=line["gold"])


def qa_prompt(line, task_name=None):
    return Doc(task_name=task_name, query=f"{{line['q']}}", choices=[line["answer"]], gold_index=0)


tinymc = LightevalTaskConfig(name="tinymc", prompt_function=mc_prompt, hf_repo="{work}/data/mc",
    hf_subset="default", hf_avail_splits=["test"], evaluation_splits=["test"], few_shots_split=None,
    few_shots_select=None, metrics=[Metrics.loglikelihood_acc], generation_size=-1, stop_sequence=None)
tinyqa = LightevalTaskConfig(name="tinyqa", prompt_function=qa_prompt, hf_repo="{work}/data/qa",
    hf_subset="default", hf_avail_splits=["test"], evaluation_splits=["test"], few_shots_split=None,
    few_shots_select=None, metrics=[Metrics.exact_match], generation_size=6, stop_sequence=["\\n"])
TASKS_TABLE = [tinymc, tinyqa]
'''
)

# lighteval 0.13 imports every built-in task module when it builds its task registry
# (`tasks/registry.py`, `Registry.load_all_task_configs`), and some of them reach the network at
# import: `tasks/tasks/tiny_benchmarks.py` downloads tinyBenchmarks.pkl from GitHub,
# `tasks/tasks/mt_bench/main.py` builds an LLM judge that asks the Hub for its model. Offline that
# fails before any task runs. The runner below therefore loads no built-in task (only the custom
# tasks file) and then calls lighteval's own CLI: evaluation, metrics and the files written
# (`logging/evaluation_tracker.py`, `EvaluationTracker.save`) are lighteval's, unchanged.
(work / "run_lighteval.py").write_text(
    """
import sys
from lighteval.tasks.registry import Registry
Registry._load_from_files = staticmethod(lambda files, module_prefix: {})
Registry._load_from_subdirs = staticmethod(lambda subdirs: {})
from lighteval.__main__ import app
sys.argv = ["lighteval"] + sys.argv[1:]
app()
"""
)

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

corpus = [r["q"] + " " + " ".join(r["choices"]) for r in MC] + [r["q"] + " " + r["answer"] for r in QA]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus * 5, trainers.BpeTrainer(
    vocab_size=400, special_tokens=["<|endoftext|>", "<unk>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                               unk_token="<unk>", pad_token="<|endoftext|>")

# One tiny GPT-2 trained a little on the tasks' own texts, saved at three points of its training
# (`ckpt/step<N>`, N = optimizer steps x 40): a few answers flip between checkpoints. The last
# two multiple-choice docs are left out of the training texts, so that their answers stay a guess.
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=len(fast), n_positions=128, n_embd=32, n_layer=1, n_head=2,
                                   bos_token_id=0, eos_token_id=0))
texts = [f"Question: {r['q']}\nAnswer: {r['choices'][r['gold']]}" for r in MC[:3]] + [f"{r['q']} {r['answer']}\n" for r in QA]
batch = fast(texts, return_tensors="pt", padding=True)
labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
done = 0
shutil.rmtree(fixture, ignore_errors=True)
for step in [1000, 2000, 3000]:
    while done < step // 40:
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        done += 1
    ckpt = Path("ckpt") / f"step{step}"
    model.save_pretrained(work / ckpt)
    fast.save_pretrained(work / ckpt)
    # one --output-dir for every checkpoint: lighteval keeps them apart by model name
    subprocess.run(
        [sys.executable, str(work / "run_lighteval.py"), "accelerate",
         f"model_name={ckpt},batch_size=1,dtype=float32,cache_dir={work / 'cache'}",
         "tinymc|0,tinyqa|0", "--custom-tasks", str(work / "tasks.py"),
         "--output-dir", "out", "--save-details"],
        check=True, cwd=work,
    )
shutil.copytree(work / "out", fixture)
print("fixture written to", fixture)
