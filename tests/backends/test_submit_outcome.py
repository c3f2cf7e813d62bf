"""Which failed submit commands prove that nothing was submitted (issue 22 item 4).

A refusal is certain only where the scheduler said why in its own words (the lines below
were printed by the real sbatch, Grid Engine's qsub and Slurm's Torque qsub of the test
cluster); a timeout, a signal, a lost reply or words nobody recognises leave the outcome
unknown (the row stays SUBMITTING and is looked up by its token). Real runs of both paths:
tests/reliability/test_submit_unknown.py.
"""

from __future__ import annotations

import pytest

from jobkit.backends.base import Backend
from jobkit.backends.local import LocalBackend
from jobkit.backends.pbs.backend import PbsBackend
from jobkit.backends.sge.backend import SgeBackend
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.core.errors import SchedulerError
from jobkit.core.proc import SchedulerTimeout

SOCKET = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
PARTITION = (
    "sbatch: error: invalid partition specified: nope\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
)


def failed(rc: int | None, stderr: str, stdout: str = "") -> SchedulerError:
    return SchedulerError(["submit"], rc, stdout, stderr)


@pytest.mark.parametrize(
    ("backend", "error", "refused"),
    [
        (SlurmBackend(), failed(1, PARTITION), True),
        (
            SlurmBackend(),
            failed(1, "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\""),
            True,
        ),
        (
            SlurmBackend(),
            failed(
                1,
                "sbatch: error: Batch job submission failed: Unable to contact slurm"
                " controller (connect failure)",
            ),
            True,
        ),
        (SlurmBackend(), failed(None, "", "command not found"), True),
        (SlurmBackend(), failed(1, SOCKET), False),
        (
            SlurmBackend(),
            failed(
                1,
                "sbatch: error: Batch job submission failed: Zero Bytes were transmitted"
                " or received",
            ),
            False,
        ),
        (SlurmBackend(), failed(1, ""), False),  # no words: nothing proves a refusal
        (SlurmBackend(), failed(1, "slurm_load_partitions: garbled\x00"), False),
        (SlurmBackend(), failed(-9, "sbatch: error: killed"), False),  # a signal
        (SlurmBackend(), failed(0, "", "odd reply"), False),  # exit 0, no id printed
        (SlurmBackend(), SchedulerTimeout(["sbatch"], None, "", "", reason="timed out"), False),
        (
            SgeBackend(),
            failed(
                1,
                "Unable to run job: Job was rejected because job requests unknown queue"
                ' "nope"\nExiting.',
            ),
            True,
        ),
        (SgeBackend(), failed(1, 'qsub: invalid option argument "-bogus"'), True),
        (
            SgeBackend(),
            failed(
                1,
                "error: commlib error: got select error (Connection refused)\nUnable to run"
                ' job: unable to send message to qmaster using port 1 on host "vm": got send'
                " error\nExiting.",
            ),
            True,
        ),
        (
            SgeBackend(),
            failed(
                1,
                "error: failed receiving gdi request response for mid=1 (got syncron"
                " message receive timeout error).",
            ),
            False,
        ),
        (PbsBackend(), failed(1, "qsub: Unknown queue MSG=requested queue not found"), True),
        (
            PbsBackend(),
            failed(1, f"There was an error running the Slurm sbatch command.\n'{PARTITION}'"),
            True,
        ),
        (
            PbsBackend(),
            failed(1, f"There was an error running the Slurm sbatch command.\n'{SOCKET}'"),
            False,
        ),
        (PbsBackend(), failed(1, "qsub: End of File"), False),
        (LocalBackend(), failed(1, ""), True),  # a launcher's own exit status is certain
    ],
)
def test_only_a_stated_refusal_is_certain(
    backend: Backend, error: SchedulerError, refused: bool
) -> None:
    assert backend.submission_refused(error) is refused
