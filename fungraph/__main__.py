"""``python -m fungraph`` (and the installed ``fungraph`` command): see fungraph/cli.py."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from fungraph.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
