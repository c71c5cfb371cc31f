#!/usr/bin/python3
"""PyTorch DDP peer of `mpirun -np P hetrain train`: the same model, data, global batch and
optimizer, with torch.distributed (gloo, the backend Debian's torch 1.13 has) on localhost.

Run with Debian's /usr/bin/python3 (python3-torch). Spawns --procs processes (init_method
tcp://127.0.0.1:PORT), each with torch.set_num_threads(1); the caller sets
OPENBLAS_NUM_THREADS=1. Each epoch every process draws the same permutation; a global batch of
--batch samples is split into contiguous equal parts (rank r takes part r), as hetrain's
allreduce strategy does; DDP averages the gradients (bucketed all-reduce, 25 MB buckets).
Data and model come from bench/torch_peer.py (preloaded tensors, no DataLoader).
Timed: --epochs epochs of training after an untimed warm-up of 20 steps (undone). Prints ONE
line from rank 0: img_per_s=... test_acc=... train_loss=... procs=...
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402  (read_idx, load, build)


def worker(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=rank, world_size=args.procs)
    xtr, ytr = torch_peer.load(args.data_dir, "train")
    xte, yte = torch_peer.load(args.data_dir, "test")
    if args.train_limit:
        xtr, ytr = xtr[:args.train_limit], ytr[:args.train_limit]
    torch.manual_seed(args.seed)
    model = torch_peer.build(args.model)
    ddp = DDP(model)  # broadcasts rank 0's parameters
    P, B, n = args.procs, args.batch, xtr.shape[0]

    def run_epochs(epochs, opt, max_steps=None):
        seen, loss_sum, steps = 0, 0.0, 0
        for e in range(epochs):
            g = torch.Generator().manual_seed(args.seed * 1000 + e)
            perm = torch.randperm(n, generator=g)
            for pos in range(0, n, B):
                idx = perm[pos:pos + B]
                part = (idx.numel() + P - 1) // P
                mine = idx[rank * part:(rank + 1) * part]
                if mine.numel() == 0:  # DDP needs every rank in every step
                    mine = idx[:1]
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(ddp(xtr.index_select(0, mine)), ytr.index_select(0, mine))
                loss.backward()
                opt.step()
                seen += idx.numel()
                loss_sum += loss.item() * idx.numel()
                steps += 1
                if max_steps and steps >= max_steps:
                    return seen, loss_sum
        return seen, loss_sum

    saved = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    run_epochs(1, opt, max_steps=20)  # warm-up, undone
    model.load_state_dict(saved)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    dist.barrier()
    t0 = time.perf_counter()
    seen, loss_sum = run_epochs(args.epochs, opt)
    dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
                          for i in range(0, xte.shape[0], 1000))
        print(f"img_per_s={seen / secs:.0f} test_acc={correct / xte.shape[0]:.4f} "
              f"train_loss={loss_sum / seen:.4f} procs={P} secs={secs:.2f}", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.procs, join=True)


if __name__ == "__main__":
    main()
