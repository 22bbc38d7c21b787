"""The pages that measure outage replays' runs, timed on a replay database as it is.

    make replay-check        # leaves var/replay-check/db.sqlite3: 11 replays, ~3,800 runs
    .venv/bin/python bench/bench_replay_pages.py var/replay-check/db.sqlite3 [--tree DIR ...]

Each ``--tree`` (another checkout, say the commit before a change; default: this one) serves the
same copy of the database in its own process, and the trees take turns, a round each, so they
share the load of the moment. Timed through Django's test client, logged in: the runs list, the
Outages page and the newest incident's page, with the login page as the baseline of the moment.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("/accounts/login/", "/runs/", "/outages/", "incident")

CHILD = r"""
import json, os, sys, time
import django
django.setup()
from django.contrib.auth.models import User
from django.test import Client
from breakers.models import Incident
user = User.objects.filter(username="bench").first()
user = user or User.objects.create_user("bench", password="bench-pass-123456")
client = Client()
client.force_login(user)
incident = Incident.objects.order_by("-pk").values_list("pk", flat=True).first()
urls = [f"/incidents/{incident}/" if p == "incident" else p for p in json.loads(sys.argv[1])]
times = {}
for url, page in zip(urls, json.loads(sys.argv[1])):
    client.get(url)  # warm
    samples = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        status = client.get(url).status_code
        samples.append(time.perf_counter() - start)
        assert status == 200, (url, status)
    times[page] = samples
print(json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("database", type=Path, help="a SQLite file a replay wrote")
    parser.add_argument("--tree", action="append", type=Path, help="a checkout to time")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5, help="per page and round")
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    results: dict[str, dict[str, list[float]]] = {str(t): {p: [] for p in PAGES} for t in trees}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "replays.sqlite3"
        shutil.copy(args.database, copy)
        env = os.environ | {
            "DATABASE_URL": f"sqlite:///{copy}",
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "DEBUG": "True",  # serves its static files without collectstatic
            "ALLOWED_HOSTS": "testserver",
        }
        for _ in range(args.rounds):
            for tree in trees:
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, json.dumps(PAGES), str(args.requests)],
                    cwd=tree, env=env | {"PYTHONPATH": str(tree)}, capture_output=True,
                    text=True, check=True, timeout=600,
                )  # fmt: skip
                for page, samples in json.loads(out.stdout.splitlines()[-1]).items():
                    results[str(tree)][page] += samples
    print("| tree | " + " | ".join(f"{p} p50 ms" for p in PAGES) + " |")
    print("|---|" + "---:|" * len(PAGES))
    for tree, pages in results.items():
        cells = [f"{statistics.median(pages[p]) * 1000:.1f}" for p in PAGES]
        print(f"| {tree} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
