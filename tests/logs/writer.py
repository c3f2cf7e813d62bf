"""A real writer process for the follower tests: writes numbered lines to a file.

python writer.py PATH COUNT [--first K] [--tag T] [--delay S] [--split] [--mode a|w]
                  [--wait FILE] [--tail TEXT]
Each line is `T-K`. --split writes every line in two flushed halves (partial lines);
--wait waits for FILE to exist before writing; --tail writes TEXT without a newline at the end.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("count", type=int)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--tag", default="line")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--mode", default="a")
    parser.add_argument("--wait")
    parser.add_argument("--tail")
    args = parser.parse_args()
    if args.wait:
        while not os.path.exists(args.wait):
            time.sleep(0.01)
    os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
    with open(args.path, args.mode + "b", buffering=0) as out:
        for number in range(args.first, args.first + args.count):
            line = f"{args.tag}-{number}\n".encode()
            if args.split:
                half = len(line) // 2
                out.write(line[:half])
                time.sleep(0.0005)
                out.write(line[half:])
            else:
                out.write(line)
            if args.delay:
                time.sleep(args.delay)
        if args.tail:
            out.write(args.tail.encode())


if __name__ == "__main__":
    main()
