"""Command line: `python -m autograder release|execute`."""

from __future__ import annotations

import argparse
import sys

from autograder import execute, release


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    release_parser.add_argument("lessons", nargs="*", help="lessons to release (default: all)")
    execute_parser = commands.add_parser(
        "execute", help="re-run solution notebooks and store their outputs (for maintainers)")
    execute_parser.add_argument("lessons", nargs="*", help="lessons to execute (default: all)")
    args = parser.parse_args(argv)
    if args.command == "release":
        out = release.release(names=args.lessons or None)
        print(f"Student notebooks written to {out}")
    elif args.command == "execute":
        for name, seconds in execute.execute_solutions(args.lessons or None).items():
            print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
