"""train/ranks/spawn.py and the trainer's --local-rank / --spawn arguments (pure parts; the spawned
run itself is tests/e2e/test_launchers.py)."""

from __future__ import annotations

import pytest

from train.cli import main
from train.env.launch import LaunchEnv
from train.ranks.spawn import child_environ, exit_code


def test_exit_code_failure_beats_requeue_beats_success() -> None:
    assert exit_code([0, 0]) == 0
    assert exit_code([75, 0]) == 75
    assert exit_code([75, 3, 143]) == 3
    assert exit_code([0, 143]) == 143


def test_each_child_knows_its_place() -> None:
    env = LaunchEnv("single", 0, 0, 1, 1, 0, 1, "127.0.0.1", 29511, None)
    assert child_environ(env, 1, 4) == {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29511",
        "JOBKIT_SPAWNED": "1",
    }


@pytest.mark.parametrize("flag", ["--local-rank", "--local_rank"])
def test_local_rank_contradicting_the_environment_is_one_line(
    flag: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert main(["--config", "mlp", f"{flag}=1"]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m train: --local-rank 1 contradicts LOCAL_RANK=0 in the environment\n")


def test_spawn_count_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "mlp", "--spawn", "0"]) == 2
    assert capsys.readouterr().err == (
        "python -m train: --spawn 0: give a number of processes between 1 and 1024\n"
    )
