"""The Python SDK's echo server passes every YEP server-side transcript of the conformance
corpus (conformance/yep/server/), replayed by the corpus's own runner, conformance/run.py.

Run from the repo root: python3 -m unittest discover -s sdk/python/tests -v
"""

import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
ECHO = HERE.parent / "examples" / "echo_server.py"
RUNNER = REPO_ROOT / "conformance" / "run.py"


class ConformanceTest(unittest.TestCase):
    def test_the_echo_server_passes_the_yep_server_corpus(self):
        out = subprocess.run(
            [sys.executable, str(RUNNER), "server", str(REPO_ROOT / "conformance" / "yep" / "server"),
             "--", sys.executable, str(ECHO)],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn(" passed, 0 failed", out.stdout)


if __name__ == "__main__":
    unittest.main()
