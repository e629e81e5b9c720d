"""``python -m fungraph`` (and the installed ``fungraph`` command): see fungraph/cli.py."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from fungraph.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
