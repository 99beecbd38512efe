#!/usr/bin/env python3
"""Mirror pinned npm packages, with their whole dependency trees, for the loopback registry.

    scripts/mirror.py npm <dest> <registry-url> <name@version>...

npm resolves the trees (`npm install --package-lock-only`, the packages together and each by
itself, as a test may install either way); for each package version of the union this fetches
the registry's version document into `<dest>/<name>/<version>.json` and its tarball into
`<dest>/<name>/-/<file>.tgz`, checking the tarball against the document's integrity.
`tests/fixtures/registry/serve.py` serves the result. Called by `scripts/test` only: the tests
themselves never reach a registry.
"""

import base64
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request


def resolve(specs, registry):
    """Every (name, version) npm puts in the lock of an install of `specs`."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "package.json"), "w") as f:
            f.write("{}")
        subprocess.run(
            ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit",
             "--no-fund", "--loglevel=error", f"--registry={registry}", *specs],
            cwd=tmp, check=True, stdout=subprocess.DEVNULL,
        )
        with open(os.path.join(tmp, "package-lock.json")) as f:
            lock = json.load(f)
    found = set()
    for key, entry in lock.get("packages", {}).items():
        if not key or entry.get("link") or "version" not in entry:
            continue
        name = entry.get("name") or key.rsplit("node_modules/", 1)[-1]
        found.add((name, entry["version"]))
    return found


def fetch(url):
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def mirror_one(dest, registry, name, version):
    doc_path = os.path.join(dest, name, f"{version}.json")
    tarball_dir = os.path.join(dest, name, "-")
    if os.path.exists(doc_path):
        return
    doc = json.loads(fetch(f"{registry}{urllib.parse.quote(name, safe='@')}/{version}"))
    tarball_url = doc["dist"]["tarball"]
    body = fetch(tarball_url)
    integrity = doc["dist"].get("integrity", "")
    if integrity.startswith("sha512-"):
        digest = base64.b64encode(hashlib.sha512(body).digest()).decode()
        if digest != integrity[len("sha512-"):]:
            raise SystemExit(f"mirror: {name}@{version}: tarball does not match its integrity")
    os.makedirs(tarball_dir, exist_ok=True)
    with open(os.path.join(tarball_dir, tarball_url.rsplit("/", 1)[-1]), "wb") as f:
        f.write(body)
    # The document last: its presence says the version is complete.
    with open(doc_path + ".part", "w") as f:
        json.dump(doc, f)
    os.replace(doc_path + ".part", doc_path)


def npm(dest, registry, specs):
    registry = registry.rstrip("/") + "/"
    # The packages together and each by itself, resolved at once.
    sets = [specs] + [[s] for s in specs] if len(specs) > 1 else [specs]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        packages = set().union(*pool.map(lambda s: resolve(s, registry), sets))
        jobs = [pool.submit(mirror_one, dest, registry, n, v) for n, v in sorted(packages)]
        for job in jobs:
            job.result()
    print(f"mirror: {len(packages)} npm package versions in {dest}", file=sys.stderr)


def main(argv):
    if len(argv) < 4 or argv[0] != "npm":
        raise SystemExit(__doc__)
    npm(argv[1], argv[2], argv[3:])


if __name__ == "__main__":
    main(sys.argv[1:])
