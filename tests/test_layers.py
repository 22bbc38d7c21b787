"""The layer check that `make lint` runs (scripts/import_graph.py): this tree passes it, and a
wrong-way import, a runtime cycle between modules, any cycle between packages or a test that
imports a conftest fails it."""

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
    "a test that imports a conftest instead of asking for its fixture": (
        {
            "runs/__init__.py": "",
            "tests/__init__.py": "",
            "tests/fleet/__init__.py": "",
            "tests/fleet/conftest.py": "",
            "tests/fleet/test_a.py": "from tests.fleet.conftest import Report\n",
            "tests/fleet/test_b.py": "from tests.fleet import conftest\n",
            "tests/fleet/test_c.py": "import conftest\n",
        },
        [
            "tests/fleet/test_a.py -> tests.fleet.conftest",
            "tests/fleet/test_b.py -> tests.fleet.conftest",
            "tests/fleet/test_c.py -> conftest",
            "imports of a conftest: 3",
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


PACKAGE_CYCLES = {
    "two rooms that import each other through different modules": (
        {
            "breakers/__init__.py": "",
            "breakers/alerts/__init__.py": "",
            "breakers/alerts/creation.py": "from breakers.fleet import store\n",
            "breakers/alerts/facts.py": "",
            "breakers/fleet/__init__.py": "",
            "breakers/fleet/store.py": "",
            "breakers/fleet/watch.py": "from breakers.alerts import facts\n",
        },
        ["breakers.alerts <-> breakers.fleet"],
    ),
    "a room that names another's types, which imports it back": (
        {
            "breakers/__init__.py": "",
            "breakers/alerts/__init__.py": "",
            "breakers/alerts/delivery.py": "from breakers.transports import base\n",
            "breakers/alerts/messages.py": "",
            "breakers/transports/__init__.py": "",
            "breakers/transports/base.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from breakers.alerts.messages import Message\n"
            ),
        },
        ["breakers.alerts <-> breakers.transports"],
    ),
    "a subpackage and the package around it": (
        {
            "runs/__init__.py": "",
            "runs/otlp/__init__.py": "",
            "runs/otlp/views.py": "from runs.otlp.decode import spans\n",
            "runs/otlp/mapping.py": "",
            "runs/otlp/decode/__init__.py": "",
            "runs/otlp/decode/spans.py": "from runs.otlp import mapping\n",
        },
        ["runs.otlp <-> runs.otlp.decode"],
    ),
}


@pytest.mark.parametrize("files, said", PACKAGE_CYCLES.values(), ids=PACKAGE_CYCLES.keys())
def test_a_cycle_between_packages_fails_without_any_between_modules(
    tmp_path: Path, files: dict[str, str], said: list[str]
) -> None:
    result = check(make_tree(tmp_path, files))
    assert "runtime import cycles: 0" in result.stdout
    assert "cycles only through TYPE_CHECKING imports: 0" in result.stdout
    assert "package-level cycles: 1" in result.stdout
    assert all(line in result.stdout for line in said), result.stdout
    assert result.returncode == 1


def test_an_apps_top_level_modules_are_not_one_package(tmp_path: Path) -> None:
    """models.py below every room and admin.py above them, as Django places them: no cycle."""
    tree = make_tree(
        tmp_path,
        {
            "breakers/__init__.py": "",
            "breakers/models.py": "",
            "breakers/admin.py": "from breakers.fleet_service import commands\n",
            "breakers/fleet_service/__init__.py": "",
            "breakers/fleet_service/commands.py": "from breakers import models\n",
        },
    )
    result = check(tree)
    assert "package-level cycles: 0" in result.stdout
    assert result.returncode == 0, result.stdout
