"""Parsing and formatting of durations and memory sizes: the spec's units, the schedulers'
clocks (`[D-][H:]M:S`) and how jobkit shows an elapsed time, an ETA or an age. The one
place these are read and written (issue 23: one reader per unit)."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"^(?:(?P<days>\d+)-)?(?P<h>\d+):(?P<m>\d{1,2}):(?P<s>\d{1,2})$"  # [D-]HH:MM:SS
)
_DAYS_HOURS = re.compile(r"^(?P<days>\d+)-(?P<h>\d+)$")  # D-HH (Slurm also accepts it)
_MINUTES_SECONDS = re.compile(r"^\d+:\d{1,2}$")
_MEMORY = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?$", re.IGNORECASE)
_MEMORY_FACTORS_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "": 1}


def parse_duration(value: object) -> int:
    """Seconds from minutes (int), 'HH:MM:SS', 'D-HH:MM:SS' or 'D-HH'; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("must be minutes or HH:MM:SS / D-HH:MM:SS")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"must be at least 1 minute (got {value})")
        return value * 60
    if not isinstance(value, str):
        raise ValueError("must be minutes or HH:MM:SS / D-HH:MM:SS")
    text = value.strip()
    if text.isdigit():
        return parse_duration(int(text))
    match = _DURATION.match(text)
    if match:
        days = int(match["days"] or 0)
        hours, minutes, seconds = int(match["h"]), int(match["m"]), int(match["s"])
        if minutes > 59 or seconds > 59:
            raise ValueError(f"minutes and seconds must be below 60 (got {value!r})")
        total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    else:
        match = _DAYS_HOURS.match(text)
        if not match and _MINUTES_SECONDS.match(text):
            raise ValueError(
                f"{text} is ambiguous: Slurm reads MM:SS (minutes and seconds), many mean"
                " HH:MM; write HH:MM:SS, e.g. 01:30:00"
            )
        if not match:
            raise ValueError(f"must be minutes, HH:MM:SS or D-HH:MM:SS (got {value!r})")
        total = (int(match["days"]) * 24 + int(match["h"])) * 3600
    if total < 1:
        raise ValueError(f"must be positive (got {value!r})")
    return total


def format_slurm_time(seconds: int) -> str:
    """Slurm's D-HH:MM:SS (or HH:MM:SS under a day)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    hms = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hms}" if days else hms


def format_hms(seconds: int) -> str:
    """PBS walltime: HH:MM:SS with hours allowed past 24."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def parse_memory_mb(value: object) -> int:
    """Megabytes from '32G', '500M', '1.5T', '64GB' or a bare number of megabytes."""
    if isinstance(value, bool):
        raise ValueError("must be a size like 32G or 500M")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"must be positive (got {value})")
        return value
    if not isinstance(value, str):
        raise ValueError("must be a size like 32G or 500M")
    match = _MEMORY.match(value.strip())
    if not match:
        raise ValueError(f"must be a size like 32G or 500M (got {value!r})")
    megabytes = float(match["n"]) * _MEMORY_FACTORS_MB[match["unit"].upper()]
    if megabytes < 1:
        raise ValueError(f"must be at least 1M (got {value!r})")
    return round(megabytes)


def format_memory(megabytes: int, *, pbs: bool = False) -> str:
    """Slurm '32G'/'500M', or PBS '32gb'/'500mb'; whole gigabytes where exact."""
    if megabytes % 1024 == 0:
        return f"{megabytes // 1024}gb" if pbs else f"{megabytes // 1024}G"
    return f"{megabytes}mb" if pbs else f"{megabytes}M"


_PERIOD = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[smhdw])$", re.IGNORECASE)
_PERIOD_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_period(value: object) -> int:
    """Seconds from `6h`, `30m`, `1d`, `2w`, `90s`, or any parse_duration form; 0 (or "0")
    is 0 (off). ValueError otherwise."""
    if isinstance(value, str):
        text = value.strip()
        match = _PERIOD.match(text)
        if match:
            return round(float(match["n"]) * _PERIOD_UNIT_S[match["unit"].lower()])
        if text == "0":
            return 0
    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(
            f"must be 0 (off) or a time like 6h, 30m, 1d, minutes or HH:MM:SS (got {value!r})"
        ) from None


def format_period(seconds: float) -> str:
    """`6h`, `90m`, `1d`, `45s`: the largest unit that divides it exactly."""
    whole = int(seconds)
    for unit in ("w", "d", "h", "m"):
        size = _PERIOD_UNIT_S[unit]
        if whole >= size and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def parse_clock(text: str) -> float | None:
    """Seconds from a scheduler's `[D-][HH:]MM:SS[.mmm]` (squeue %M, sacct Elapsed and
    TotalCPU); None when blank or not a time."""
    text = text.strip()
    if not text:
        return None
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if len(parts) > 3:
        return None
    seconds = 0.0
    for part in parts:
        whole, dot, fraction = part.partition(".")
        if not whole.isdigit() or (dot and not fraction.isdigit()):
            return None
        seconds = seconds * 60 + float(part)
    return days * 86400 + seconds


def format_duration(seconds: float | None) -> str:
    """`0:05`, `1:02:03`, `2-03:04:05` (Slurm's style, whole seconds); `-` when unknown."""
    if seconds is None:
        return "-"
    return _clock(int(max(seconds, 0)), day_separator="-")


def format_clock(seconds: float) -> str:
    """`0:42`, `1:32:00`, `2d 03:10:00`: an ETA as a clock reads (rounded seconds)."""
    return _clock(round(max(seconds, 0.0)), day_separator="d ")


def _clock(total: int, *, day_separator: str) -> str:
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}{day_separator}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_age(seconds: float, *, fine: bool = False) -> str:
    """`45s`, `3m`, `2h`, `4d`; with `fine`, two units past an hour: `3h05m`, `2d04h`."""
    total = int(max(seconds, 0.0))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    if total < 86400:
        return f"{total // 3600}h{total % 3600 // 60:02d}m" if fine else f"{total // 3600}h"
    return f"{total // 86400}d{total % 86400 // 3600:02d}h" if fine else f"{total // 86400}d"
