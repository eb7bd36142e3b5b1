"""``rlvitals mcp``: serve the tools and catalogues to an agent over MCP (stdio).

A thin layer over :mod:`rlvitals._mcp`; needs the ``mcp`` extra. The server speaks JSON-RPC on
stdin/stdout and writes its logs to stderr; it runs until the client closes the stream.
"""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]

HELP = "serve doctor, inspect, scan, compare, explain and acr to an agent (MCP over stdio)"
EXAMPLE = """\
The agent client starts this command itself; docs/agents.md has the settings for common
clients, the tools with their arguments and a skill file. Needs the mcp extra
(pip install -e '.[mcp]' in an rlvitals checkout; docs/install.md).

examples:
  rlvitals mcp
  claude mcp add rlvitals -- rlvitals mcp"""


def register(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals._mcp import serve

    serve()
    return 0
