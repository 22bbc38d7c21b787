"""Screenshot the Outages page of a real outage replay: docs/screenshots/outages-replay.png.

    .venv/bin/python scripts/screenshot_replay.py --database var/replay-agents/db.sqlite3 \\
        [--agent hand-written] [--out docs/screenshots/outages-replay.png]

Serves the replay's own database (what `make replay-check` or `scripts/replay_agents.sh` left)
with Django's server on a free port, logs in as the demo operator, and saves the full Outages
page of the newest batch the agent played, with the system chromium (as tests/browser do). The
table beside it in docs/benchmarks.md ("The outage replay in brief") must be that batch's
(`python -m breakers.replay.check --markdown ...json`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _batch_key(env: dict[str, str], agent: str) -> str:
    code = (
        "import django; django.setup()\n"
        "from breakers.replay.outage import recent_replay_batches\n"
        "agent = " + repr(agent) + "\n"
        "batches = [b for b in recent_replay_batches() if len(b.modes) == 5 and "
        "(b.first.scenario.get('agent') or 'hand-written') == agent]\n"
        "print(batches[0].key if batches else '')\n"
    )
    out = subprocess.run(
        [PYTHON, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", type=Path, required=True, help="the replay's SQLite file")
    parser.add_argument("--agent", default="hand-written")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/screenshots/outages-replay.png")
    args = parser.parse_args()
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "DATABASE_URL": f"sqlite:///{args.database.resolve()}",
        "DEBUG": "True",
    }
    key = _batch_key(env, args.agent)
    if not key:
        raise SystemExit(f"no full batch (five modes) played by {args.agent} in {args.database}")
    subprocess.run([PYTHON, "manage.py", "ensure_demo_operator"], cwd=ROOT, env=env, check=True)
    port = _free_port()
    server = subprocess.Popen(
        [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/accounts/login/", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        from playwright.sync_api import expect, sync_playwright

        chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(url + "/accounts/login/")
            page.get_by_label("Username").fill("operator")
            page.get_by_label("Password").fill("breaker-panel-demo")
            page.get_by_role("button", name="Log in").click()
            page.goto(f"{url}/outages/?batch={key}")
            expect(page.locator(".js-plotly-plot")).to_have_count(7)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
    print(f"wrote {args.out} (batch {key})")


if __name__ == "__main__":
    main()
