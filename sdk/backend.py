"""A PEP 517 build backend for breaker-panel-sdk, standard library only.

It packages `../breakers/sdk` (the same files the server runs) as `breakers/sdk` in a wheel with
no `breakers/__init__.py`: `breakers` is then a namespace package in an agent's environment, and
the SDK never ships, or clashes with, the server's Django app package of that name.

    python sdk/backend.py [DIR]        # what `make sdk` runs: writes the wheel to DIR (dist/)
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "breakers" / "sdk"
TIMESTAMP = (1980, 1, 1, 0, 0, 0)  # fixed: the same tree always builds the same bytes


def _project() -> dict:
    with (HERE / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["project"]


def _dist_name(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.3",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"License: {project['license']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {req}; extra == "{extra}"' for req in requirements]
    lines.append("Description-Content-Type: text/markdown")
    readme = (HERE / project["readme"]).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + readme


def _sources() -> list[tuple[str, bytes]]:
    files = sorted(
        path
        for path in SOURCE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed")
    )
    return [(f"breakers/sdk/{p.relative_to(SOURCE).as_posix()}", p.read_bytes()) for p in files]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    project = _project()
    dist_info = f"{_dist_name(project)}-{project['version']}.dist-info"
    wheel_name = f"{_dist_name(project)}-{project['version']}-py3-none-any.whl"
    wheel_file = (
        b"Wheel-Version: 1.0\nGenerator: breaker-panel sdk/backend.py\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files = [
        *_sources(),
        (f"{dist_info}/METADATA", _metadata(project).encode()),
        (f"{dist_info}/WHEEL", wheel_file),
    ]
    if scripts := project.get("scripts"):
        lines = ["[console_scripts]", *(f"{name} = {target}" for name, target in scripts.items())]
        files.append((f"{dist_info}/entry_points.txt", ("\n".join(lines) + "\n").encode()))
    record = [*(_record_line(name, data) for name, data in files), f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files:
            info = zipfile.ZipInfo(name, TIMESTAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    target = Path(wheel_directory)
    target.mkdir(parents=True, exist_ok=True)
    (target / wheel_name).write_bytes(buffer.getvalue())
    return wheel_name


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    return []


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parent / "dist")
    print(out / build_wheel(str(out)))
