"""The SDK as its own distribution: built from this tree, installed into a bare venv (nothing
but pip), where it imports and runs the README's snippet and installs nothing else."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"


PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]


def build_wheel(out: Path) -> Path:
    """What `make sdk` runs: the SDK's own pyproject through pip (hatchling comes from the lock,
    so the build needs no index)."""
    subprocess.run(
        [*PIP_WHEEL, "--wheel-dir", str(out), str(SDK)],
        check=True,
        timeout=120,
    )
    (wheel,) = out.glob("breaker_panel_sdk-*.whl")
    return wheel


def readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Using the SDK", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_the_sdk_and_nothing_of_the_server(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    packaged = {n for n in names if not n.startswith("breaker_panel_sdk-")}
    assert "breaker_panel/__init__.py" in packaged
    assert "breaker_panel/integrations/langchain.py" in packaged
    assert "breaker_panel/client/sender.py" in packaged  # subpackages too
    assert "breaker_panel/py.typed" in packaged
    assert all(name.startswith("breaker_panel/") for name in packaged)  # nothing of breakers/
    (info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    requirements = [line for line in metadata.splitlines() if line.startswith("Requires-Dist")]
    assert requirements and all("; extra ==" in line for line in requirements)
    assert {"openai-agents", "langchain", "pydantic-ai", "mcp"} <= {
        line.split(": ")[1] for line in metadata.splitlines() if line.startswith("Provides-Extra")
    }


def test_the_metadata_has_no_relative_links(wheel: Path) -> None:
    (info,) = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" in n}
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    links = re.findall(r"\]\(([^)]+)\)", metadata)
    assert all(link.startswith(("https://", "http://", "#")) for link in links), links


def test_the_same_tree_builds_the_same_bytes(wheel: Path, tmp_path: Path) -> None:
    assert build_wheel(tmp_path).read_bytes() == wheel.read_bytes()


class BareVenv:
    """A venv with nothing but pip, and the SDK wheel installed from a file (no index)."""

    def __init__(self, where: Path, wheel: Path) -> None:
        venv.create(where / "venv", with_pip=True)
        self.where = where
        self.python = str(where / "venv" / "bin" / "python")
        self.run("-m", "pip", "install", "--no-index", str(wheel))

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        result = subprocess.run(
            [self.python, *args],
            env=env,
            cwd=self.where,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0 or not check, result.stderr
        return result


@pytest.fixture(scope="module")
def bare(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> BareVenv:
    return BareVenv(tmp_path_factory.mktemp("bare"), wheel)


FRAMEWORKS = ("django", "agents", "langchain", "pydantic_ai", "mcp", "runs", "controlplane")


def test_a_bare_venv_has_nothing_but_pip_and_the_sdk(bare: BareVenv) -> None:
    listed = json.loads(bare.run("-m", "pip", "list", "--format=json").stdout)
    assert {package["name"] for package in listed} == {"pip", "breaker-panel-sdk"}


def test_the_readme_snippet_runs_as_written(bare: BareVenv) -> None:
    snippet = bare.where / "snippet.py"
    snippet.write_text(readme_snippet(), encoding="utf-8")
    output = bare.run(str(snippet)).stdout
    assert "web_search: it keeps failing (last error: 503 from vendor)" in output


def test_importing_the_sdk_imports_no_framework(bare: BareVenv) -> None:
    check = f"import sys, breaker_panel; print(sorted(set(sys.modules) & set({FRAMEWORKS!r})))"
    assert bare.run("-c", check).stdout.strip() == "[]"


def test_an_integration_without_its_framework_names_the_extra(bare: BareVenv) -> None:
    for module, extra in (
        ("langchain", "langchain"),
        ("openai_agents", "openai-agents"),
        ("pydantic_ai", "pydantic-ai"),
    ):
        result = bare.run("-c", f"import breaker_panel.integrations.{module}", check=False)
        assert result.returncode == 1
        assert "DidNotEnable" in result.stderr and f"breaker-panel-sdk[{extra}]" in result.stderr
