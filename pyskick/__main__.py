"""``python -m pyskick`` runs the ``pyskick`` command (the same entry point as the script)."""

from __future__ import annotations

from pyskick_cli.main import main

if __name__ == "__main__":
    main()
