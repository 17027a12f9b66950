"""The command that puts docvec in an agent's hands: ``docvec mcp``, the MCP server over stdio."""

from __future__ import annotations

from typing import Annotated

import typer

from .._errors import ConfigError
from ._common import CollectionOption, app, errors, open_index, read_index, settings
from ._sharing import answering_reads


@app.command()
def mcp(
    collection: CollectionOption = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error (to stderr).")] = "warning",
) -> None:
    """Serve the index to an agent over stdio, as a Model Context Protocol server: tools search, get_page
    and list_documents, page images as resources (docs/rag.md: each client's set-up). With `docvec serve`
    running it sends everything there; otherwise it holds the data folder for the agent's session, and
    answers other commands' searches meanwhile (writers wait)."""
    s = settings(collection=collection, log_level=log_level.upper())
    with errors():
        try:
            from ..mcp import create_server
        except ImportError as e:  # the extra is not installed
            raise ConfigError(
                f"the MCP server needs the mcp package ({e.name} is missing): pip install 'docvec[mcp]'"
            ) from None
        # an agent that may add makes the index if there is none; one that reads needs one that is there
        opened = open_index(s) if s.mcp_add else read_index(s)
        with opened as index, answering_reads(index, s, command="mcp"):
            # stdout is the protocol's: nothing else may be written there
            roots = s.ingest_roots if s.mcp_add else []
            create_server(index, add_roots=roots).run("stdio")
