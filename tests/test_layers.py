"""The layer check that `make lint` runs (scripts/import_graph.py): this tree passes it, and a
wrong-way import or a runtime cycle fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


def check(root: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--check", "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_this_tree_imports_one_way() -> None:
    result = check(ROOT)
    assert result.returncode == 0, result.stdout


WRONG_WAY = {
    "an import from a layer above, and a cycle": (
        {
            "runs/__init__.py": "",
            "runs/services.py": "from breakers.services import fleet_store\n",
            "breakers/__init__.py": "",
            "breakers/services.py": "from runs import services\n",
        },
        ["runs.services -> breakers.services", "runtime import cycles: 1"],
    ),
    "a UI import from anywhere but the URLs": (
        {
            "controlplane/__init__.py": "",
            "controlplane/dashboard/__init__.py": "",
            "controlplane/dashboard/board.py": "",
            "controlplane/api.py": "from controlplane.dashboard import board\n",
        },
        ["only the URLs import the UI"],
    ),
    "test code imported by an app or a benchmark": (
        {
            "runs/__init__.py": "",
            "runs/services.py": "from tests.waiting import wait_for\n",
            "bench/bench_x.py": "import tests.processes\nfrom scripts.testing import processes\n",
        },
        [
            "runs/services.py -> tests.waiting",
            "bench/bench_x.py -> tests.processes",
            "test or benchmark code where it does not belong: 2",
        ],
    ),
}


@pytest.mark.parametrize("files, said", WRONG_WAY.values(), ids=WRONG_WAY.keys())
def test_a_wrong_way_import_fails(tmp_path: Path, files: dict[str, str], said: list[str]) -> None:
    result = check(make_tree(tmp_path, files))
    assert result.returncode == 1
    assert all(line in result.stdout for line in said), result.stdout


def test_a_type_only_import_is_not_a_runtime_cycle_but_still_points_one_way(
    tmp_path: Path,
) -> None:
    tree = make_tree(
        tmp_path,
        {
            "breakers/__init__.py": "",
            "sdk/python/src/breaker_panel/__init__.py": "",
            "sdk/python/src/breaker_panel/a.py": "from breaker_panel import b\n",
            "sdk/python/src/breaker_panel/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from breaker_panel import a\n"
            ),
            "breakers/models.py": "from breaker_panel import a\n",
            "controlplane/__init__.py": "",
            "controlplane/dashboard/__init__.py": "",
            "controlplane/dashboard/views.py": "from breakers import models\n",
            "controlplane/urls.py": "from controlplane.dashboard import views\n",
        },
    )
    result = check(tree)
    assert result.returncode == 0, result.stdout
    assert "cycles only through TYPE_CHECKING imports: 1" in result.stdout


def test_only_the_replay_s_public_module_is_imported_from_outside_it(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "breakers/__init__.py": "",
            "breakers/replay/__init__.py": "",
            "breakers/replay/clock.py": "",
            "breakers/replay/outage.py": "from breakers.replay import clock\n",
            "breakers/api.py": "from breakers.replay import outage\n",
        },
    )
    assert check(tree).returncode == 0, check(tree).stdout
    (tree / "breakers" / "tasks.py").write_text("from breakers.replay.clock import SimClock\n")
    result = check(tree)
    assert result.returncode == 1
    assert "breakers.tasks -> breakers.replay.clock (import breakers.replay.outage instead)" in (
        result.stdout
    )
