"""bench/scripts/train_loop.py's loop in PyTorch, for a machine without TensorFlow (bench_watch.py --job torch):
says "ready", waits for a line on stdin, runs STEPS steps (a small MLP's forward, loss, backward and SGD
update on CPU tensors) and prints "took SECONDS" for the steps alone.

    python train_loop_torch.py STEPS [THREADS]

THREADS: torch's intra-op threads (default: a quarter of the CPUs, 1 to 4), so that the loop uses a few
cores and leaves the others to a watcher."""

import os
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else max(1, min(4, (os.cpu_count() or 1) // 4))
torch.set_num_threads(THREADS)
torch.set_num_interop_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(64, 256)


def train_step() -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    loss = torch.mean(torch.square(model(x)))
    loss.backward()
    opt.step()
    return loss


for _ in range(5):  # warmed up before the clock starts
    train_step()
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
for _ in range(STEPS):
    train_step()
print("took %.6f" % (time.perf_counter() - t0), flush=True)
