"""Generate docs/spec.md, the job-spec reference, from the schema.

python -m jobkit.spec.doc            # print it
python -m jobkit.spec.doc --write    # rewrite docs/spec.md
python -m jobkit.spec.doc --check    # exit 1 and show the diff when docs/spec.md is stale
"""

from __future__ import annotations

import argparse
import difflib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from jobkit.spec import noderange, sections, values
from jobkit.spec.schema import JobSpec
from jobkit.spec.walk import iter_fields, section_model

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "spec.md"
EXAMPLES_DIR = ROOT / "examples"

_SPECIAL_TYPES = {
    values._duration: "duration",
    values._memory: "memory size",
    values._array: "array range",
    values._signal: "SIGNAL@SECONDS",
    values._as_argv: "command (string or list)",
    values._as_list: "list of strings (one string allowed)",
    sections._nccl_shorthand: "section or preset name",
    noderange.node_count: "node count or range MIN:MAX",
    values._job_name: "name",
    values._host: "host name",
    values._env_name: "variable name",
}


def generate(examples_dir: Path = EXAMPLES_DIR) -> str:
    """The whole reference as Markdown."""
    parts = [_HEADER, _first_spec(examples_dir), "## Keys\n", _key_tables(), _PROSE]
    parts.append(_honours_table())
    parts.append(_examples(examples_dir))
    return "\n".join(part.rstrip("\n") + "\n" for part in parts)


def describe_type(annotation: Any, extra: list[Any] | None = None) -> str:
    """A short human name for a field's type: integer, duration, list of strings, ..."""
    for func in _validators(annotation, extra or []):
        if func in _SPECIAL_TYPES:
            return _SPECIAL_TYPES[func]
    base = annotation
    while get_origin(base) is Annotated:
        base = get_args(base)[0]
    origin = get_origin(base)
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(base) if arg is not type(None)]
        if {_plain(arg) for arg in members} == {str, int, float, bool}:
            return "string, number or boolean"
        names = [describe_type(arg) for arg in members]
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        values = [f"`{value}`" for value in get_args(base)]
        return values[0] if len(values) == 1 else "one of " + ", ".join(values)
    if origin is list:
        inner = describe_type(get_args(base)[0])
        simple = not any(mark in inner for mark in ("(", " or ", ","))
        return f"list of {inner}s" if simple else f"list of ({inner})"
    if origin is dict:
        key, value = (describe_type(arg) for arg in get_args(base))
        return f"mapping of {key} to {value}"
    if isinstance(base, type) and issubclass(base, BaseModel):
        return "section"
    return {int: "integer", bool: "boolean", str: "string", float: "number"}.get(base, str(base))


def _validators(annotation: Any, extra: list[Any]) -> Iterator[Any]:
    """Validator functions attached to a type (outermost first), and those in `extra`."""
    for item in extra:
        func = getattr(item, "func", None)
        if func is not None:
            yield func
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        for item in metadata:
            func = getattr(item, "func", None)
            if func is not None:
                yield func
        yield from _validators(inner, [])


def _plain(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _range(field: FieldInfo) -> str:
    lower = next((item.ge for item in field.metadata if isinstance(item, Ge)), None)
    upper = next((item.le for item in field.metadata if isinstance(item, Le)), None)
    if lower is not None and upper is not None:
        return f", {lower} to {upper}"
    bounds = []
    for item in field.metadata:
        if isinstance(item, Ge):
            bounds.append(f">= {item.ge}")
        elif isinstance(item, Gt):
            bounds.append(f"> {item.gt}")
        elif isinstance(item, Le):
            bounds.append(f"<= {item.le}")
        elif isinstance(item, Lt):
            bounds.append(f"< {item.lt}")
    return f", {' and '.join(bounds)}" if bounds else ""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return ""
    else:
        value = field.default
    if value is PydanticUndefined:
        return ""
    return f"`{_yaml_value(value)}`"


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _key_tables() -> str:
    sections: dict[tuple[str, ...], list[str]] = {(): []}
    order: list[tuple[str, ...]] = [()]
    for path, field in iter_fields():
        sub = section_model(field.annotation)
        if sub is not None:
            sections[path] = []
            order.append(path)
        parent = path[:-1]
        description = field.description or (sub.__doc__ or "" if sub is not None else "")
        type_text = describe_type(field.annotation, list(field.metadata)) + _range(field)
        cells = [f"`{'.'.join(path)}`", _cell(type_text), _default(field), _cell(description)]
        sections.setdefault(parent, []).append("| " + " | ".join(cells) + " |")
    out = []
    for path in order:
        model = JobSpec if not path else _model(path)
        title = "Top level" if not path else f"`{'.'.join(path)}`"
        doc = " ".join((model.__doc__ or "").split())
        out.append(f"### {title}\n\n{doc}\n")
        out.append("| key | type | default | description |\n|---|---|---|---|")
        out.extend(sections[path])
        out.append("")
    return "\n".join(out)


def _model(path: tuple[str, ...]) -> type[BaseModel]:
    model: type[BaseModel] = JobSpec
    for part in path:
        sub = section_model(model.model_fields[part].annotation)
        assert sub is not None
        model = sub
    return model


def _honours_table() -> str:
    """Which backend honours which scheduler key, and how (Backend.honours)."""
    from jobkit.backends.honours import SCHEDULER_KEYS
    from jobkit.backends.registry import backend_class, builtin_names

    names = builtin_names()
    rows = [_HONOURS_INTRO, "| key | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for key in SCHEDULER_KEYS:
        cells = [backend_class(name).honours.get(key, "-") for name in names]
        rows.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _first_spec(examples_dir: Path) -> str:
    quickstart = examples_dir / "quickstart.yaml"
    if not quickstart.is_file():
        return ""
    text = quickstart.read_text(encoding="utf-8")
    return "A first spec (`examples/quickstart.yaml`):\n\n```yaml\n" + text.rstrip("\n") + "\n```\n"


def _examples(examples_dir: Path) -> str:
    lines = [_EXAMPLES_INTRO]
    for path in sorted(examples_dir.glob("*.yaml")):
        lines.append(f"- [`examples/{path.name}`](../examples/{path.name}): {_summary(path)}")
    return "\n".join(lines) + "\n"


def _summary(path: Path) -> str:
    """The leading comment of an example, without command lines and a closing `...:`."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("#  "):
            words.append(line[1:].strip())
    text = " ".join(words)
    if text.endswith(":") and ". " in text:
        text = text[: text.rindex(". ") + 1]
    return text


_HEADER = """\
<!-- Generated from jobkit/spec/schema.py by `python -m jobkit.spec.doc --write`; do not edit. -->
# The job spec

A job spec is one YAML file: what to run (`run`), on what (`resources`), where (`backend`),
and how processes start (`launch`). Only `name` and `run` are required; every other key has a
default. `jobkit render SPEC` prints the script a spec becomes, without running anything.
"""

_EXAMPLES_INTRO = """\
## Examples

Every file in `examples/` is a valid spec; a test loads each one and renders every script
(backend submitit has none: submitit writes its own).
They set `env.venv: .venv`: the virtualenv holding torch, relative to the directory you
submit from (the repository root in CI, where `.ci/venv.sh` creates it). Drop that line
where `python3` already has torch, or point it at your own environment.
"""

_HONOURS_INTRO = """\
## Keys a backend cannot honour

The keys below ask the scheduler for something; each backend states which it honours
(`Backend.honours`, jobkit/backends/honours.py): *directive* (a script directive or submit
option), *launcher* (jobkit's launcher does it: on local and ssh, `resources.time` stops the
job at the limit, SIGTERM then SIGKILL after the launcher's grace, and the job ends TIMEOUT),
*jobkit* (jobkit acts on it: later attempts, bad nodes), `-` (not honoured). A key the job
file or a `--set` gives a value other than its default, on a backend that cannot honour it,
is refused at `render`, `check` and `submit` in one line, exit 2:

```
job.yaml:9: resources.mem: the sge backend has no memory request here (add your site's ...)
```

Also refused: PBS Pro's `resources.constraint`; submitit's `env.python` with a
`run.command`; `launch.rdzv_timeout` unless torchrun with `rdzv: c10d`; `launch.rdzv` unless
torchrun; `launch.max_restarts` unless torchrun or distributed-launch (srun, mpirun, spawn,
submitit's one task per process restart nothing); `run.python` beside a `run.command` (it is
the bundled trainer's interpreter); a backend's own section (`sge:`, `pbs:`,
`ssh:`) set for another backend (sge and pbs read `ssh:` with their `spawner: ssh`). Values
from the site profile or the defaults never count, so one profile serves every backend.
`--ignore-unsupported` (render, check, submit) goes on without such keys and prints one line
per key on stderr (`job.yaml:9: resources.mem: ignored: ...`): for one spec used on several
backends. `scheduler.pbs_flavor` and `scheduler.pbs_spawner` are deprecated for `pbs.flavor`
and `pbs.spawner`: they still work, with a one-line note on stderr.

"""

_PROSE = """\
Checks across keys (each reported at the key named first):

- `run`: exactly one of `run.train` and `run.command`.
- `ssh.hosts`: backend `ssh` needs at least one host; `resources.nodes` must equal their number.
- `resources.nodes`: backend `local` runs on one node. A range `MIN:MAX` needs a backend that
  allocates one (slurm; the others refuse it naming the key) and `launch.launcher: torchrun`
  with `launch.rdzv: c10d`; MIN <= MAX.
- `env.nccl.nsocks_perthread`: `socket_nthreads` x `nsocks_perthread` at most 64 (NCCL's limit).
- `launch.launcher`: `srun` needs backend `slurm` or `submitit`; `mpirun` needs `slurm` or `pbs`;
  `none` any backend but `submitit`, and the bundled trainer only with one process per node.
- `run.command`: a command that is itself a launcher (`torchrun ...`, `python -m
  torch.distributed.run`, `srun`, `mpirun`/`mpiexec`, `deepspeed`, `accelerate launch`) needs
  `launch.launcher: none` (it would run a launcher inside jobkit's: 2x2 processes, two
  rendezvous).
- `launch.extra_args`: not with launcher `none` or `spawn` (nothing to pass them to); each entry
  must split like a shell.
- `resources.nodes` with backend `ssh`: the number of `ssh.hosts`, which it is when not given.
- `resources.tasks_per_node`: 1 with `torchrun` (one torchrun per node starts every process);
  with `srun`/`mpirun` it must equal `launch.nproc_per_node`.
- `launch.nproc_per_node`: at most `resources.gpus_per_node` on a GPU job; 1 to 1024.
- `launch.master_port`: 1024 to 65535.
- `resources.gpu_type` needs `resources.gpus_per_node`; `scheduler.mail_type` needs
  `scheduler.mail_user`.
- `resources.cpus_per_process`: not together with `resources.cpus_per_task`.
- `logs.dir`: no `%` with backend `submitit` (submitit reads `%j`, `%t`... in its folder;
  a submission folder with `%` is refused at submit).
- `sweep`: `sweep.grid` or `sweep.sets` (or both); no list empty, no value repeated in a grid
  list, no set repeated, no key both in the grid and in a set; at most 10,000 tasks; not with
  backend `submitit`. slurm, pbs, sge: `scheduler.array` is filled as `0-{N-1}` (`%K` with
  `sweep.max_parallel`), and one given may name only task ids 0 to N-1; local, ssh: no
  `scheduler.array` (docs/sweeps.md).
- Any string that reaches a script (names, paths, commands, variables) must not hold a
  newline, carriage return or NUL.

## Launchers: what each process gets (`launch.launcher`)

- `torchrun`: one torchrun per node starts `nproc_per_node` workers; each gets torchrun's RANK,
  LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT. The job's
  exit code is the program's own: torchrun exits 1, and the script reads the code from
  torchrun's "Root Cause" block (`bash -c 'exit 3'` ends `FAILED (exit 3)`).
- `srun` (Slurm): one task per process; each gets RANK, LOCAL_RANK, WORLD_SIZE,
  LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK from SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
  SLURM_NODEID, and MASTER_ADDR, MASTER_PORT: a script using `env://` runs unchanged.
- `mpirun` (Slurm, PBS): `mpirun -np WORLD_SIZE`; ranks from OMPI_COMM_WORLD_* (Open MPI) or
  PMI_* (MPICH), and MASTER_ADDR, MASTER_PORT. Run as root, Open MPI needs
  OMPI_ALLOW_RUN_AS_ROOT: the script sets it then only.
- `none`: `run.command` as written, once per node, with NODE_RANK, NNODES, MASTER_ADDR,
  MASTER_PORT and JOBKIT_*; with one process per node also RANK (= NODE_RANK), LOCAL_RANK 0,
  WORLD_SIZE (= NNODES), LOCAL_WORLD_SIZE 1. The job's exit code is the command's own.
- `spawn`, `distributed-launch`: as torchrun's (see the key).

`none` is for a command that is its own launcher (a seed's `torchrun --nnodes=$NNODES
--node_rank=$NODE_RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT main.py`, runs
verbatim), and for a program of one process per node that needs no torchrun (no
ChildFailedError traceback around its failure). Under any other launcher a `run.command` that
starts a launcher (`torchrun`, `python -m torch.distributed.run`, `srun`, `mpirun`,
`deepspeed`, `accelerate launch`) is refused in one line: it would run a launcher inside
jobkit's.

`launch.nproc_per_node: auto` is `resources.gpus_per_node`, or 1 without GPUs; on local and
ssh without `gpus_per_node` (no scheduler hands out GPUs there) each host counts its own when
the job starts, as torchrun's own `auto` does: the entries of `CUDA_VISIBLE_DEVICES` when set,
else the GPUs `nvidia-smi` lists, else 1. `launch.extra_args` are added to torchrun's, srun's
or mpirun's own line (`--rdzv-conf=read_timeout=300`, `--cpu-bind=cores`, `--bind-to core`).
The bundled trainer's `distributed.strategy` `single` and `dp` (DataParallel over the node's
GPUs) run one process: a spec starting more is refused before queueing (`launch.nproc_per_node:
1`).

## CPUs: `cpus_per_process` and `cpus_per_task`

`resources.cpus_per_process` is what the seeds' "CPU cores per GPU" means: the cores of each
training process, whatever the launcher. jobkit asks the scheduler for the per-task count that
gives each process that many, and exports `OMP_NUM_THREADS` with it (your `env.vars` win).
`resources.cpus_per_task` means the same (a seed's `cpus_per_task: 4` is "4 cores per GPU"):
where one scheduler task starts several processes (torchrun: one task per node), the task asks
for it times `nproc_per_node`, and `jobkit render`, `submit` and `check` say so in one line
(`resources.cpus_per_task 4 is taken per process ...: each node's one torchrun task asks for 4 x
2 = 8 CPUs`); give one of the two, not both. With `nproc_per_node: 4` and `cpus_per_process: 8`
(or `cpus_per_task: 8`):

| backend | launcher | scheduler tasks per node | CPUs asked for each task | OMP_NUM_THREADS |
|---------|----------|--------------------------|--------------------------|-----------------|
| slurm | torchrun | 1 | `--cpus-per-task=32` (also on the `srun` of the torchruns) | 8 |
| slurm | srun, mpirun | 4 | `--cpus-per-task=8` | 8 |
| pbs (Pro) | torchrun | 1 | `select=N:ncpus=32:mpiprocs=1` | 8 |
| pbs (Pro) | mpirun | 4 | `select=N:ncpus=32:mpiprocs=4` | 8 |
| pbs (Torque) | torchrun | 1 | `nodes=N:ppn=32` | 8 |
| submitit | (one task per process) | 4 | `cpus_per_task=8` | 8 |
| local, ssh | torchrun | - | nothing to ask | 8 |

Neither given: nothing is asked for, so the scheduler's default holds (Slurm: 1 CPU per task;
PBS: `ncpus=1` / `ppn=1` per task), shared by every process a task starts; render, submit and
check say so in one line when a task starts several (`no CPU request ...: set
resources.cpus_per_process`). jobkit does not choose a count for you: a node's CPUs are the
site's to share out, and asking for more than a node has would leave the job pending forever.
A torchrun starting several processes then gets `OMP_NUM_THREADS=1` (what torchrun sets anyway,
without its warning banner).

## Logging and debugging: `env.log_level`, `env.debug`

Exported into the job's environment (before `env.nccl.vars` and `env.vars`, which win):

| `log_level` | `JOBKIT_LOG_LEVEL`, `LOGLEVEL` | `TORCH_CPP_LOG_LEVEL` | and |
|---|---|---|---|
| `DEBUG` | `DEBUG` | `INFO` | `TORCH_DISTRIBUTED_DEBUG=DETAIL` |
| `INFO` | `INFO` | `INFO` | |
| `WARNING` | `WARNING` | `WARNING` | |
| `ERROR` | `ERROR` | `ERROR` | |

`debug: true` exports `TORCH_DISTRIBUTED_DEBUG=DETAIL`, `TORCH_CPP_LOG_LEVEL=INFO`,
`TORCH_SHOW_CPP_STACKTRACES=1`, `TORCH_NCCL_ASYNC_ERROR_HANDLING=1`, `NCCL_DEBUG=INFO`,
`NCCL_DEBUG_SUBSYS=INIT,NET`, `PYTHONFAULTHANDLER=1`, `LOGLEVEL=INFO` and
`CUDA_LAUNCH_BLOCKING=1`.

`JOBKIT_LOG_LEVEL` is the bundled trainer's level (train/runlog.py): DEBUG adds `debug:` lines
(the process group it joins, with MASTER_ADDR/PORT) to the console and `rank-R.log`; WARNING
keeps only warnings on the console, ERROR nothing; `rank-R.log` always keeps every INFO line
(`jobkit doctor` and `plot` read it). `LOGLEVEL` is torchrun's own level (at INFO it logs its
launch configuration and rendezvous result). `TORCH_CPP_LOG_LEVEL` has no DEBUG: INFO is its
most verbose. With both keys, `log_level` wins for `LOGLEVEL` and `TORCH_CPP_LOG_LEVEL`.
`CUDA_LAUNCH_BLOCKING=1` makes a CUDA error name the kernel that caused it, at a large cost in
speed: for debugging only.

## NCCL: `env.nccl`

| preset | exports |
|---|---|
| `auto` (default) | nothing: NCCL decides |
| `ethernet` | `NCCL_IB_DISABLE=1 NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4` |
| `infiniband` | `NCCL_IB_DISABLE=0` |

Then the keys, each winning over the preset: `socket_ifname` (`NCCL_SOCKET_IFNAME`), `ib_hca`
(`NCCL_IB_HCA`), `ib_gid_index` (`NCCL_IB_GID_INDEX`), `p2p_level` (`NCCL_P2P_LEVEL`),
`socket_nthreads` (`NCCL_SOCKET_NTHREADS`), `nsocks_perthread` (`NCCL_NSOCKS_PERTHREAD`);
then `env.nccl.vars` (any `NCCL_*`), then `env.vars`. Every value is exported quoted.

## Value formats

- **duration** (`resources.time`): minutes as a number (`90`), `HH:MM:SS`, `D-HH:MM:SS` or
  `D-HH`, as Slurm reads them. Unquoted is fine: `time: 24:00:00` is a day (YAML 1.1 alone
  would read the base-60 number 86400). `M:SS` (`1:30`) is refused as ambiguous.
- **memory size** (`resources.mem`): `32G`, `500M`, `1.5T`, `64GB`, or a number of megabytes.
- **array range** (`scheduler.array`): `0-9`, `1,3,5`, `0-99:2`, `0-99%10` (at most 10 at once).
- **SIGNAL@SECONDS** (`scheduler.signal`): `USR2@120` sends SIGUSR2 120 s before the time limit.
- **command** (`run.command`): a list of arguments, or one string split like a shell would
  (quotes group words; nothing is expanded).
- Text is taken as written, quoted or not: `account: 0123` is "0123" (not YAML 1.1's octal 83),
  `env.vars: {TAG: 1.10}` exports `1.10`, `partition: on` is the partition "on", trainer
  overrides reach `--set` as written (`optim.lr: 3.0e-4`).
- **node count or range** (`resources.nodes`): a number, or `MIN:MAX` for an elastic job
  (`nodes: 2:4`, unquoted is fine: YAML 1.1 alone would read the base-60 number 124). It is
  short for `nodes: 2` and `max_nodes: 4`; `2:2` is just 2. `010` is refused.
- Numbers (ports, counts...) refuse the forms YAML 1.1 reads surprisingly: `010` (octal 8)
  and `1:30` (base-60 90) are errors that say how to write the number.
- Booleans take YAML's words (`yes`/`no`/`on`/`off`/`true`/`false`); `~`, `null` or nothing
  means "not set".
- Keys are taken as written: `on:` is the key `on`, not `true`.

## Layers

A spec is built from layers, each overriding the ones before it:

1. the defaults above;
2. the site profile, if the spec (or `--profile`) names one;
3. the job file;
4. each `--set KEY=VALUE`, in order;
5. `--backend NAME` (and `--profile NAME`, which only chooses the profile).

Mappings merge key by key; lists and single values replace the whole value below them
(a job file's `env.modules: [cuda]` replaces a profile's list; it does not append).
`env.nccl: infiniband` is short for `env.nccl: {preset: infiniband}` and merges as such.

`--set` takes a dotted key path and a YAML value: `--set resources.nodes=2`,
`--set env.modules=[cuda,nccl]`, `--set resources.partition=gpu`,
`--set 'run.command=python3 train.py --lr 0.1'`. Under a mapping of your own keys
(`env.vars`, `env.nccl.vars`, `run.train.overrides`) the rest of the path is one key:
`--set run.train.overrides.train.steps=50` sets the override `train.steps`.
An empty value is `null`: `--set profile=` drops the spec's profile.

## Site profiles

A profile is a partial spec kept by a site or a user, e.g. the partition, account, modules
and NCCL settings of one cluster:

```yaml
# ~/.config/jobkit/profiles/mycluster.yaml
resources:
  partition: gpu
  account: proj42
env:
  modules: [cuda/12.4, nccl]
  nccl: infiniband
template_dir: templates      # optional: a site template folder, relative to this file
```

A spec uses it with `profile: mycluster` (or `jobkit render --profile mycluster SPEC`).
Profile `NAME` is the first `NAME.yaml` (or `NAME.yml`) found in:

1. each entry of `JOBKIT_PROFILES` (folders or files, separated by `:`; a file is the
   profile named after its stem);
2. `$XDG_CONFIG_HOME/jobkit/profiles` (default `~/.config/jobkit/profiles`).

A profile may set any key except `profile`. It may also set `template_dir`, which only a
profile may hold: a folder of templates (same layout as the bundled `templates/`) that
`render` uses instead of the bundled ones; `--template-dir DIR` overrides it.
An unknown profile name is an error that lists the profiles found.

## Errors

Every problem with a spec is one line on stderr and exit code 2: the file and line where
the offending value was set (the job file, the profile, or the `--set` option), the key
path, and what is wrong. Every schema error (a wrong type, a value out of range, an unknown
key...) is reported at once, one line each, lowest layer first, then by line; a file that
cannot be read as YAML, and the checks across keys (run once every key is valid), stop at
their first problem:

```
jobkit: job.yaml:7: resources.nodes: must be >= 1 (got 0)
jobkit: job.yaml:3: resourcez: unknown key (did you mean 'resources'?)
jobkit: job.yaml:5: resources.nodes: duplicate key
jobkit: job.yaml:2: invalid YAML: mapping values are not allowed here
jobkit: job.yaml: run: is required
jobkit: /etc/jobkit/profiles/site.yaml:4: resources.mem: must be a size like 32G or 500M (got '32x')
jobkit: --set resources.nodes=0: resources.nodes: must be >= 1 (got 0)
jobkit: --backend lsf: backend: must be one of: local, slurm, pbs, ssh, submitit (got 'lsf')
```

A missing key, or one a check across keys names but no layer set, is reported at its
nearest parent written in the file, or at the file without a line.
"""


def main(argv: list[str] | None = None) -> int:
    """Print, write or check docs/spec.md."""
    parser = argparse.ArgumentParser(prog="python -m jobkit.spec.doc", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {DOC_PATH}")
    group.add_argument("--check", action="store_true", help="exit 1 if it is out of date")
    args = parser.parse_args(argv)
    text = generate()
    if args.write:
        DOC_PATH.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        diff = stale_diff(text)
        sys.stdout.write(diff)
        return 1 if diff else 0
    sys.stdout.write(text)
    return 0


def stale_diff(text: str | None = None) -> str:
    """The unified diff from docs/spec.md to what the schema generates ('' when up to date)."""
    current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.is_file() else ""
    wanted = generate() if text is None else text
    return "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            "docs/spec.md",
            "generated from jobkit/spec/schema.py",
        )
    )


if __name__ == "__main__":
    sys.exit(main())
