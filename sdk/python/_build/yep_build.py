"""The SDK's own PEP 517 build backend: standard library only.

The SDK is one module with no dependencies, so building it needs nothing either: `pip install
./sdk/python` works offline, without setuptools or wheel. It builds a pure-Python wheel, an
editable wheel (PEP 660) and an sdist. Name, version and summary come from pyproject.toml's
[project] table.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = "yep_sdk.py"
SDIST_FILES = ["pyproject.toml", "README.md", MODULE, "_build/yep_build.py"]


def _project():
    """The [project] table's string values (all this backend reads)."""
    fields, section = {}, None
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"$', line)
            if section == "project" and m:
                fields[m.group(1)] = m.group(2)
    for key in ("name", "version"):
        if key not in fields:
            raise ValueError(f"pyproject.toml: [project] has no `{key}`")
    return fields


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
    ]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def _write_wheel(wheel_directory, files):
    """Write a py3-none-any wheel holding `files` (archive path -> bytes) plus its dist-info."""
    project = _project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata(project).encode()
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: yep_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    record = [_record_line(p, d) for p, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.path.join(ROOT, MODULE), "rb") as f:
        return _write_wheel(wheel_directory, {MODULE: f.read()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line puts the source directory on sys.path, so edits take effect at once.
    pth = f"{_dist_name(_project())}.pth"
    return _write_wheel(wheel_directory, {pth: (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in SDIST_FILES:
            t.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        pkg_info = _metadata(project).encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(pkg_info)
        entry.mode = 0o644
        t.addfile(entry, io.BytesIO(pkg_info))
    return name
