"""The layer check that `make lint` runs (scripts/import_graph.py): this tree passes it, and a
wrong-way import or a runtime cycle fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_an_import_from_a_layer_above_fails(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "runs/__init__.py": "",
            "runs/services.py": "from breakers.services import fleet_store\n",
            "breakers/__init__.py": "",
            "breakers/services.py": "from runs import services\n",
        },
    )
    result = check(tree)
    assert result.returncode == 1
    assert "runs.services -> breakers.services" in result.stdout
    assert "runtime import cycles: 1" in result.stdout


def test_a_type_only_import_is_not_a_runtime_cycle_but_still_points_one_way(
    tmp_path: Path,
) -> None:
    tree = make_tree(
        tmp_path,
        {
            "breakers/__init__.py": "",
            "breakers/sdk/__init__.py": "",
            "breakers/sdk/a.py": "from breakers.sdk import b\n",
            "breakers/sdk/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from breakers.sdk import a\n"
            ),
            "breakers/models.py": "from breakers.sdk import a\n",
            "controlplane/__init__.py": "",
            "controlplane/dashboard/__init__.py": "",
            "controlplane/dashboard/views.py": "from breakers import models\n",
            "controlplane/urls.py": "from controlplane.dashboard import views\n",
        },
    )
    result = check(tree)
    assert result.returncode == 0, result.stdout
    assert "cycles only through TYPE_CHECKING imports: 1" in result.stdout


def test_only_the_urls_import_the_ui(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "controlplane/__init__.py": "",
            "controlplane/dashboard/__init__.py": "",
            "controlplane/dashboard/board.py": "",
            "controlplane/api.py": "from controlplane.dashboard import board\n",
        },
    )
    result = check(tree)
    assert result.returncode == 1
    assert "only the URLs import the UI" in result.stdout
