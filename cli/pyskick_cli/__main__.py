"""``python -m pyskick_cli`` (and ``torchrun -m pyskick_cli``) runs the CLI."""

from __future__ import annotations

from pyskick_cli.main import main

if __name__ == "__main__":
    main()
