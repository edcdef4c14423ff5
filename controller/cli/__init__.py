"""The command line: the composition root, the one place that imports every room and wires them."""

from controller.cli.commands import main

__all__ = ["main"]
