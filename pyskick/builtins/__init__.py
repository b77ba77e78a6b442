"""Built-in plugins, registered through the same hooks as third-party plugins."""

from __future__ import annotations
