"""Instructions per ingest batch, counted by callgrind: a figure machine load does not move.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/count_ingest_instructions.py --tree old=/tmp/old10 --tree new=.

For each tree and writer it runs bench/profile_ingest.py --callgrind (this checkout's script, the
tree's code: ``--root``) under ``valgrind --tool=callgrind --instr-atstart=no`` twice, with a
small and a large number of batches, each under scripts/own_services.py (a Redis database of its
own, emptied after). Callgrind counts only the measured batches; the difference between the two
runs, divided by the difference in batches, is the cost of one more batch with whatever the first
batches paid once taken out. Only this process is counted: PostgreSQL's and Redis's own work, and
time waiting on them, are not.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent


def _count(tree: Path, writer: str, batches: int, batch_size: int, warmup: int) -> tuple[int, str]:
    with tempfile.TemporaryDirectory(prefix="bp-callgrind-out-") as out:
        command = [
            sys.executable, str(CHECKOUT / "scripts/own_services.py"), "--",
            "valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
            f"--callgrind-out-file={out}/callgrind.out.%p",
            sys.executable, str(HERE / "profile_ingest.py"), "--callgrind", "--root", str(tree),
            "--writer", writer, "--batches", str(batches), "--batch-size", str(batch_size),
            "--warmup", str(warmup),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONHASHSEED="0")
        output = subprocess.run(
            command, check=True, env=env, stdout=subprocess.PIPE, text=True
        ).stdout
        collections = re.search(r"generations 0, 1, 2\): ([\d ]+)", output)
        gcs = "/".join(collections.group(1).split()) if collections else "?"
        dumps = [
            path
            for path in Path(out).iterdir()
            if "Trigger: Client Request: measured batches" in path.read_text(errors="replace")
        ]
        if len(dumps) != 1:
            sys.exit(f"expected one 'measured batches' dump in {out}, found {len(dumps)}")
        match = re.search(r"^(?:summary|totals): (\d+)", dumps[0].read_text(), re.MULTILINE)
        if match is None:
            sys.exit(f"no instruction total in {dumps[0]}")
        return int(match.group(1)), gcs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--tree", action="append", required=True, help="NAME=PATH of a tree to count (repeat)"
    )
    parser.add_argument("--writer", action="append", choices=("postgres", "sqlite"))
    parser.add_argument("--small", type=int, default=20, help="batches in the smaller run")
    parser.add_argument("--large", type=int, default=60, help="batches in the larger run")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    writers = args.writer or ["postgres", "sqlite"]
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.tree)]
    print(f"| writer | tree | Ir, {args.small} batches | Ir, {args.large} batches "
          f"| Ir per batch (difference) | gc runs (gen 0/1/2), large |")  # fmt: skip
    print("|---|---|---:|---:|---:|---|")
    for writer in writers:
        for name, tree in trees:
            small, _ = _count(tree, writer, args.small, args.batch_size, args.warmup)
            large, gcs = _count(tree, writer, args.large, args.batch_size, args.warmup)
            per_batch = (large - small) / (args.large - args.small)
            print(f"| {writer} | {name} | {small:,} | {large:,} | {per_batch:,.0f} | {gcs} |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
