"""Where a mixed-precision offload's host time goes: bf16 ↔ fp32 casts on the host.

The offload's host Adam keeps fp32 master weights and state while the GPU holds bf16 weights
and gradients, so every step casts each gradient piece bf16 → fp32 before Adam and each
updated piece fp32 → bf16 before its copy back. This times those casts piece by piece
(host_adam.PIECE_ELEMENTS values a call, as the trainers make them) four ways: into a fresh
tensor (``.to``, what a plain cast allocates) or into a reused one (``copy_``), on one thread or
on ``threads`` intra-op threads; and fused fp32 Adam over the same values, the work they ride
beside. Rates count bytes read and written (6 a value for a cast, 28 for Adam).

    python -m impl.hybrid.host_casts --values 67108864 --threads 15 --json casts.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

from impl.hybrid.bounds import median_ms
from impl.hybrid.host_adam import ADAM_BYTES_PER_PARAMETER, HostAdam, piece_spans
from impl.rows.study_records import HOST_CAST as CAST
from impl.rows.study_records import HOST_CASTS_RUN as RUN

CAST_BYTES_PER_VALUE = 6  # read 2 and write 4, or read 4 and write 2


def measure(values: int, threads: int, repeats: int = 5) -> list[dict]:
    spans = piece_spans(values)
    low = torch.randn(values).to(torch.bfloat16)
    high = torch.empty(values)
    reused = torch.empty(spans[0][1] - spans[0][0])

    def fresh_up() -> None:
        for a, b in spans:
            low[a:b].to(torch.float32)

    def reused_up() -> None:
        for a, b in spans:
            reused[:b - a].copy_(low[a:b])

    def reused_down() -> None:
        for a, b in spans:
            low[a:b].copy_(high[a:b])

    rows = []
    for count in sorted({1, threads}):
        pool = ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(count,))
        for name, task in (("bf16->fp32 fresh", fresh_up), ("bf16->fp32 reused", reused_up),
                           ("fp32->bf16 reused", reused_down)):
            ms = pool.submit(median_ms, task, repeats, True).result()
            rows.append({CAST.operation: name, CAST.threads: count, CAST.ms: ms,
                         CAST.gbps: CAST_BYTES_PER_VALUE * values / (ms * 1e6)})
        pool.shutdown()
    engine = HostAdam([high], 1e-3, "fused", "intra-op", threads)

    def adam() -> None:
        futures = [engine.submit(engine.update, 0, i, high[a:b]) for i, (a, b) in
                   enumerate(engine.spans[0])]
        for future in futures:
            future.result()

    try:
        ms = median_ms(adam, repeats, warm=True)
    finally:
        engine.close()
    rows.append({CAST.operation: "fused fp32 Adam", CAST.threads: threads, CAST.ms: ms,
                 CAST.gbps: ADAM_BYTES_PER_PARAMETER * values / (ms * 1e6)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=1 << 26)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    # The flags, as the JSON file records them: each is named as its key.
    run = {RUN.values: args.values, RUN.threads: args.threads}
    for name, value in run.items():
        if value < 1:
            print(f"--{name}={value}: choose an integer ≥ 1", file=sys.stderr)
            return 2
    rows = measure(args.values, args.threads)
    for row in rows:
        print(f"{row[CAST.operation]:<20} {row[CAST.threads]:>3} threads {row[CAST.ms]:9.2f} ms "
              f"{row[CAST.gbps]:7.1f} GB/s")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({**run, RUN.rows: rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
