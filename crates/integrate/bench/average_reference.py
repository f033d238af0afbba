"""PyTorch reference for the averaging benchmark: load k safetensors files, mean in float64,
save in the inputs' dtype. `average_reference.py REPS OUT INPUT...`: one untimed run, then REPS
timed ones (before each, outside the timing, the output removed and dirty pages written back:
`sync`); prints the seconds as JSON."""
import json, os, sys, time
import torch
from safetensors.torch import load_file, save_file

reps, out, inputs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]


def run():
    acc, dtypes = None, None
    for p in inputs:
        sd = load_file(p)
        if acc is None:
            dtypes = {k: v.dtype for k, v in sd.items()}
            acc = {k: v.to(torch.float64) for k, v in sd.items()}
        else:
            for k, v in sd.items():
                acc[k] += v.to(torch.float64)
        del sd
    mean = {k: (v / len(inputs)).to(dtypes[k]).contiguous() for k, v in acc.items()}
    save_file(mean, out)


seconds = []
for i in range(reps + 1):
    if os.path.exists(out):
        os.remove(out)
    os.sync()  # as the Rust side: no repetition waits on an earlier one's writeback
    t = time.perf_counter()
    run()
    if i > 0:
        seconds.append(time.perf_counter() - t)
os.remove(out)
print(json.dumps({"seconds": seconds, "threads": torch.get_num_threads()}))
