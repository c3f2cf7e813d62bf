"""Running the real `jobkit` command in tests, with a registry of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Jobkit:
    """`jobkit ...` in `workdir`, with JOBKIT_HOME under the test's tmp_path."""

    workdir: Path
    home: Path

    def env(self) -> dict[str, str]:
        """This process's environment, the registry folder and the venv's bin (torchrun)."""
        env = dict(os.environ)
        env["JOBKIT_HOME"] = str(self.home)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "jobkit", *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run to its end; output captured."""
        return subprocess.run(
            self.argv(*args),
            cwd=self.workdir,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start in the background; output captured."""
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.workdir,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def submit(self, spec_file: str, *args: str) -> dict[str, Any]:
        """`jobkit submit SPEC --json`; the job as JSON."""
        done = self.run("submit", spec_file, "--json", *args)
        assert done.returncode == 0, done.stderr
        job: dict[str, Any] = json.loads(done.stdout)
        return job

    def status(self, job_id: str) -> dict[str, Any]:
        """`jobkit status ID --json`: the refreshed job."""
        done = self.run("status", job_id, "--json")
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        job: dict[str, Any] = data[0] if isinstance(data, list) else data
        return job
